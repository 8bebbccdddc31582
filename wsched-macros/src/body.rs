//! Lowering of method bodies: `yield_cmd!`, `yield_all!`, `recv!` and `call!` calls become their
//! `@__wsched_lowered` forms (which await a suspension point), and every place where a
//! suspension cannot work is reported: closures, async blocks, `.await` on anything but
//! this impl's own entries and `#[suspend]` methods, calls of those that are not
//! awaited, and DSL calls in plain methods.

use std::collections::BTreeMap;

use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, ExprMacro, Macro, Stmt, Token, Type};

use crate::model::{Errors, Role};

/// The DSL macros, by name.
const DSL: [&str; 4] = ["yield_cmd", "yield_all", "recv", "call"];

/// The DSL macro a call is, if it is one: `yield_cmd!`, `wsched::yield_cmd!` or
/// `::wsched::yield_cmd!` (and the same for the others).
fn dsl_name(mac: &Macro) -> Option<&'static str> {
    let segments = &mac.path.segments;
    let last = segments.last()?;
    let name = DSL.into_iter().find(|n| last.ident == n)?;
    match segments.len() {
        1 => Some(name),
        2 if segments[0].ident == "wsched" || segments[0].ident == "crate" => Some(name),
        _ => None,
    }
}

/// The lowered form `@__wsched_lowered await { … }` of a DSL call whose suspension
/// point is `function(argument)`, checked by `function`'s bound: the exported macro
/// awaits the block. The argument is bound first and passed by name, the binding and
/// the call spanned at `span` (the macro's name), so that a type that fails the bound
/// is one error, not two: one for the bound, where the argument is, and one for the
/// output type the bound's trait gives, where the call is (rustc reports the same
/// failure once per span). The argument's temporaries are dropped before the
/// suspension, not held across it.
///
/// `at`: `function` also takes the call's place, as a closure (`yield_one_at`).
fn checked_call(span: Span, function: TokenStream, argument: TokenStream, at: bool) -> TokenStream {
    let value = Ident::new("__wsched_argument", span);
    // The closure's `Location::caller()` is the macro's place: the future keeps it
    // as a type, not a word written into the coroutine (see `__private::At`).
    let at = at.then(|| quote_spanned!(span=> , || ::core::panic::Location::caller()));
    quote_spanned!(span=> @__wsched_lowered await {
        let #value = #argument;
        #function(#value #at)
    })
}

/// Whether `expr` is a DSL call that gives one `Result`: `yield_cmd!` of one
/// command, `recv!` without arms, or `call!` (not `yield_cmd!` of several, whose
/// value is a tuple of results, nor `yield_all!`, a vector of them).
fn gives_one_result(expr: &Expr) -> bool {
    let Expr::Macro(ExprMacro { mac, .. }) = expr else {
        return false;
    };
    match dsl_name(mac) {
        Some("recv") => !crate::recv_arms::is_arms(&mac.tokens),
        Some("call") => true,
        Some("yield_cmd") => Punctuated::<Expr, Token![,]>::parse_terminated
            .parse2(mac.tokens.clone())
            .is_ok_and(|commands| commands.len() == 1),
        _ => false,
    }
}

/// Whether tokens mention a DSL macro or `await` anywhere (then a foreign macro's
/// arguments are worth parsing).
fn mentions_dsl(tokens: &TokenStream) -> bool {
    tokens.clone().into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == "await" || DSL.iter().any(|n| i == n),
        TokenTree::Group(g) => mentions_dsl(&g.stream()),
        _ => false,
    })
}

/// Where a body is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// An `#[entry]` or `#[suspend]` method: suspension points are lowered.
    Coroutine,
    /// Any other method: suspension points are errors.
    Plain,
}

pub(crate) struct Lower<'a> {
    place: Place,
    method: String,
    /// The entries and `#[suspend]` methods of the impl, with their roles: the only
    /// things that may be `.await`ed, and that must be.
    awaitable: &'a BTreeMap<String, Role>,
    errors: &'a mut Errors,
    /// Inside a closure or an async block: its kind, for messages.
    nested: Option<&'static str>,
    /// Set just before visiting the operand of an `.await`: a call of this impl's
    /// own coroutine there is awaited; anywhere else it would never run.
    awaited: bool,
}

impl<'a> Lower<'a> {
    pub(crate) fn new(
        place: Place,
        method: String,
        awaitable: &'a BTreeMap<String, Role>,
        errors: &'a mut Errors,
    ) -> Self {
        Self {
            place,
            method,
            awaitable,
            errors,
            nested: None,
            awaited: false,
        }
    }

    /// Reports `message` at `span` and gives the expression that replaces the faulty
    /// one, so that no second error follows from it.
    fn fail(&mut self, span: Span, message: String) -> Expr {
        self.errors.span(span, message);
        syn::parse_quote_spanned!(span=> ::core::unreachable!())
    }

    /// Like [`fail`](Self::fail), keeping `kept` (the faulty call's arguments) in a
    /// closure that is never called, so that what they use is not reported unused.
    fn fail_keeping(&mut self, span: Span, message: String, kept: TokenStream) -> Expr {
        self.errors.span(span, message);
        syn::parse_quote_spanned!(span=> {
            let _ = || (#kept,);
            ::core::unreachable!()
        })
    }

    /// Reports `message` at the `.await` at `span` and gives what replaces
    /// `base.await`: an expression of the awaited future's output type, never
    /// evaluated, so that the value's uses add no error of their own (a
    /// `::core::unreachable!()` there left its type to inference, which failed with
    /// "type annotations needed" as soon as the value was used).
    fn fail_await(&mut self, span: Span, message: String, base: &Expr) -> Expr {
        self.errors.span(span, message);
        syn::parse_quote_spanned!(span=> ::wsched::__private::never_awaited(|| #base))
    }

    fn why_not_here(&self, what: &str) -> Option<String> {
        if self.place == Place::Plain {
            return Some(format!(
                "{what} can only be used in #[entry] and #[suspend] methods; mark `{}` with \
                 #[suspend] to make it a helper that entries `.await`",
                self.method
            ));
        }
        if let Some(nested) = self.nested {
            return Some(format!(
                "{what} cannot be used inside {nested} in an entry: {nested} is not part of \
                 the entry's coroutine, so it cannot suspend. Suspend in the method body \
                 itself (e.g. a `for` loop instead of an iterator closure), or move the code \
                 into a #[suspend] method"
            ));
        }
        None
    }

    /// Lowers one DSL call, visiting its arguments first.
    fn lower(&mut self, mac: &Macro, name: &'static str) -> Expr {
        let span = mac.path.span();
        if let Some(message) = self.why_not_here(&format!("`{name}!`")) {
            let commands =
                Punctuated::<Expr, Token![,]>::parse_terminated.parse2(mac.tokens.clone());
            return match commands {
                Ok(commands) if name != "recv" => {
                    // Of a call's `timeout = d`, the `d` (the whole is no expression).
                    let kept = commands
                        .into_iter()
                        .map(|e| match e {
                            Expr::Assign(a) => *a.right,
                            e => e,
                        })
                        .collect::<Punctuated<Expr, Token![,]>>();
                    self.fail_keeping(span, message, kept.into_token_stream())
                }
                _ => self.fail(span, message),
            };
        }
        if name == "recv" && crate::recv_arms::is_arms(&mac.tokens) {
            return self.lower_recv_arms(mac, span);
        }
        let parsed = match name {
            "recv" => parse_recv.parse2(mac.tokens.clone()),
            "call" => (|input: ParseStream| parse_call(input, span)).parse2(mac.tokens.clone()),
            _ => Punctuated::<Expr, Token![,]>::parse_terminated
                .parse2(mac.tokens.clone())
                .map(|p| Args::Exprs(p.into_iter().collect())),
        };
        let args = match parsed {
            Ok(args) => args,
            Err(e) => {
                self.errors.push(e);
                return syn::parse_quote_spanned!(span=> ::core::unreachable!());
            }
        };
        let lowered = match (name, args) {
            ("yield_cmd", Args::Exprs(mut exprs)) => {
                for e in &mut exprs {
                    self.visit_expr_mut(e);
                }
                match exprs.len() {
                    0 => {
                        return self.fail(
                            span,
                            "`yield_cmd!` needs a command: `yield_cmd!(MyCommand { .. })`, or \
                             several: `yield_cmd!(a, b)`"
                                .into(),
                        )
                    }
                    1 => {
                        let command = &exprs[0];
                        checked_call(
                            span,
                            quote_spanned!(span=> ::wsched::__private::yield_one_at),
                            quote!(#command),
                            true,
                        )
                    }
                    2..=8 => checked_call(
                        span,
                        quote_spanned!(span=> ::wsched::__private::yield_many),
                        quote!((#(#exprs,)*)),
                        false,
                    ),
                    _ => {
                        return self.fail(
                            span,
                            "`yield_cmd!` takes at most 8 commands; yield more with \
                             `yield_all!(commands)`"
                                .into(),
                        )
                    }
                }
            }
            ("yield_all", Args::Exprs(mut exprs)) => {
                if exprs.len() != 1 {
                    return self.fail(
                        span,
                        "`yield_all!` takes one iterable of commands: `yield_all!(commands)`"
                            .into(),
                    );
                }
                self.visit_expr_mut(&mut exprs[0]);
                quote!(@__wsched_lowered #(#exprs)*)
            }
            (_, Args::Recv(ty, timeout)) => {
                let timeout = timeout.map(|mut t| {
                    self.visit_expr_mut(&mut t);
                    t
                });
                match (ty, timeout) {
                    (None, None) => quote!(@__wsched_lowered),
                    (Some(ty), None) => quote!(@__wsched_lowered type #ty),
                    (None, Some(t)) => quote!(@__wsched_lowered timeout #t),
                    (Some(ty), Some(t)) => quote!(@__wsched_lowered type #ty, timeout #t),
                }
            }
            (_, Args::Call(mut pid, mut request, timeout)) => {
                self.visit_expr_mut(&mut pid);
                self.visit_expr_mut(&mut request);
                match timeout {
                    None => quote!(@__wsched_lowered #pid, #request),
                    Some(mut t) => {
                        self.visit_expr_mut(&mut t);
                        quote!(@__wsched_lowered #pid, #request, timeout #t)
                    }
                }
            }
            _ => unreachable!("arguments are parsed per macro"),
        };
        let path = &mac.path;
        let bang = &mac.bang_token;
        syn::parse_quote_spanned!(span=> #path #bang (#lowered))
    }

    /// Lowers `recv! { arms }` (see `recv_arms.rs`): its guards run in a closure, so
    /// they cannot suspend; its bodies and timeout are the entry's own code.
    fn lower_recv_arms(&mut self, mac: &Macro, span: Span) -> Expr {
        let mut arms: crate::recv_arms::Arms = match syn::parse2(mac.tokens.clone()) {
            Ok(arms) => arms,
            Err(e) => {
                self.errors.push(e);
                // What the receive would evaluate to, so that its `?` and the value's
                // use add no error of their own (the value's type is inferred from its
                // use, or falls back to `()`).
                return syn::parse_quote_spanned!(span=>
                    ::core::result::Result::<_, ::wsched::RecvError>::Ok(::core::unreachable!())
                );
            }
        };
        for arm in &mut arms.arms {
            if let Some(guard) = &mut arm.guard {
                self.nested("a `recv!` guard", |s| s.visit_expr_mut(guard));
            }
            self.visit_expr_mut(&mut arm.body);
        }
        if let Some(after) = &mut arms.after {
            self.visit_expr_mut(&mut after.timeout);
            self.visit_expr_mut(&mut after.body);
        }
        // Through the user's own `recv!` path, as the other lowered forms go: an
        // imported `recv` is then used, never reported unused.
        let path = &mac.path;
        let lowered = arms.expand(span);
        syn::parse_quote_spanned!(span=> #path!(@__wsched_lowered arms { #lowered }))
    }

    /// Looks into the arguments of another macro (`println!`, `vec!`, `format!`…) for
    /// DSL calls, when they parse as comma-separated expressions.
    fn lower_foreign(&mut self, mac: &mut Macro) {
        if !mentions_dsl(&mac.tokens) {
            return;
        }
        let Ok(mut args) =
            Punctuated::<Expr, Token![,]>::parse_terminated.parse2(mac.tokens.clone())
        else {
            return;
        };
        for arg in &mut args {
            self.visit_expr_mut(arg);
        }
        mac.tokens = args.into_token_stream();
    }

    /// Whether `base.await` awaits an entry or `#[suspend]` method of this impl:
    /// `self.name(..)` or `Self::name(..)`.
    fn is_own_coroutine(&self, base: &Expr) -> bool {
        match base {
            Expr::Paren(p) => self.is_own_coroutine(&p.expr),
            _ => self.own_call(base).is_some(),
        }
    }

    /// The call `self.name(..)` or `Self::name(..)` of an entry or `#[suspend]`
    /// method of this impl: how it is written (`self.name` or `Self::name`), and
    /// the method's role.
    fn own_call(&self, expr: &Expr) -> Option<(String, Role)> {
        let (written, name) = match expr {
            Expr::MethodCall(m) => {
                if !matches!(&*m.receiver, Expr::Path(p) if p.path.is_ident("self")) {
                    return None;
                }
                (format!("self.{}", m.method), m.method.to_string())
            }
            Expr::Call(c) => {
                let Expr::Path(p) = &*c.func else { return None };
                let s = &p.path.segments;
                if p.qself.is_some() || s.len() != 2 || s[0].ident != "Self" {
                    return None;
                }
                (format!("Self::{}", s[1].ident), s[1].ident.to_string())
            }
            _ => return None,
        };
        let role = *self.awaitable.get(&name)?;
        Some((written, role))
    }

    /// Reports a call of this impl's own coroutine that is not awaited: it would
    /// only build the coroutine, and drop it without running it.
    fn check_awaited(&mut self, expr: &Expr) {
        let Some((written, role)) = self.own_call(expr) else {
            return;
        };
        let what = match role {
            Role::Entry => "an #[entry] method",
            _ => "a #[suspend] method",
        };
        self.errors.at(
            expr,
            format!(
                "`{written}` is {what}, so this call does nothing until it is awaited: \
                 add `.await` (`{written}(..).await`, in an #[entry] or #[suspend] method)"
            ),
        );
    }

    fn nested(&mut self, kind: &'static str, f: impl FnOnce(&mut Self)) {
        let outer = self.nested.replace(kind);
        f(self);
        self.nested = outer;
    }
}

enum Args {
    Exprs(Vec<Expr>),
    Recv(Option<Box<Type>>, Option<Box<Expr>>),
    /// `call!`: the callee, the request, the timeout.
    Call(Box<Expr>, Box<Expr>, Option<Box<Expr>>),
}

/// `call!(pid, request)`, `call!(pid, request, timeout = d)`.
/// Missing arguments are reported at `span`, the macro's name (the end of its input
/// has no span of its own).
fn parse_call(input: ParseStream, span: Span) -> syn::Result<Args> {
    const FORMS: &str = "call!(pid, request) or call!(pid, request, timeout = d)";
    if input.is_empty() {
        return Err(syn::Error::new(
            span,
            format!("`call!` needs a callee and a request: {FORMS}"),
        ));
    }
    let pid: Box<Expr> = input.parse()?;
    if input.is_empty() {
        return Err(syn::Error::new(
            span,
            format!("`call!` needs a request after the callee: {FORMS}"),
        ));
    }
    input.parse::<Token![,]>()?;
    let request: Box<Expr> = input.parse()?;
    input.parse::<Option<Token![,]>>()?;
    if input.is_empty() {
        return Ok(Args::Call(pid, request, None));
    }
    let key: syn::Ident = input.parse()?;
    if key != "timeout" || !input.peek(Token![=]) {
        return Err(syn::Error::new(
            key.span(),
            format!("expected `timeout = <Duration>` after the request: {FORMS}"),
        ));
    }
    input.parse::<Token![=]>()?;
    let timeout: Box<Expr> = input.parse()?;
    input.parse::<Option<Token![,]>>()?;
    if !input.is_empty() {
        return Err(input.error(format!("unexpected tokens after the timeout: {FORMS}")));
    }
    Ok(Args::Call(pid, request, Some(timeout)))
}

/// `recv!()`, `recv!(T)`, `recv!(timeout = d)`, `recv!(T, timeout = d)`.
fn parse_recv(input: ParseStream) -> syn::Result<Args> {
    fn timeout(input: ParseStream) -> syn::Result<Expr> {
        let key: syn::Ident = input.parse()?;
        if key != "timeout" {
            return Err(syn::Error::new(
                key.span(),
                "expected `timeout = <Duration>`: recv!(), recv!(T), recv!(timeout = d) or \
                 recv!(T, timeout = d)",
            ));
        }
        input.parse::<Token![=]>()?;
        let e = input.parse()?;
        input.parse::<Option<Token![,]>>()?;
        Ok(e)
    }
    if input.is_empty() {
        return Ok(Args::Recv(None, None));
    }
    if input.peek(syn::Ident) && input.peek2(Token![=]) {
        let t = timeout(input)?;
        return Ok(Args::Recv(None, Some(Box::new(t))));
    }
    let ty: Box<Type> = input.parse()?;
    if input.is_empty() {
        return Ok(Args::Recv(Some(ty), None));
    }
    input.parse::<Token![,]>()?;
    if input.is_empty() {
        return Ok(Args::Recv(Some(ty), None));
    }
    let t = timeout(input)?;
    if !input.is_empty() {
        return Err(input.error("unexpected tokens after the timeout"));
    }
    Ok(Args::Recv(Some(ty), Some(Box::new(t))))
}

impl VisitMut for Lower<'_> {
    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        // Only the `.await`'s operand itself (or parentheses around it) is awaited.
        let awaited = std::mem::take(&mut self.awaited);
        if !awaited {
            self.check_awaited(expr);
        }
        match expr {
            Expr::Paren(p) if awaited => {
                self.awaited = true;
                self.visit_expr_mut(&mut p.expr);
            }
            Expr::Macro(ExprMacro { mac, .. }) => {
                if let Some(name) = dsl_name(mac) {
                    let lowered = self.lower(&mac.clone(), name);
                    *expr = lowered;
                } else {
                    self.lower_foreign(mac);
                }
            }
            Expr::Await(a) => {
                if self.place == Place::Plain {
                    // A plain method: its own `.await`s are rustc's business.
                    self.awaited = true;
                    self.visit_expr_mut(&mut a.base);
                    return;
                }
                let span = a.await_token.span;
                if let Some(nested) = self.nested {
                    let base = a.base.clone();
                    *expr = self.fail_await(
                        span,
                        format!(
                            "`.await` cannot be used inside {nested} in an entry: only the \
                             suspension points of the entry itself are driven"
                        ),
                        &base,
                    );
                    return;
                }
                if self.is_own_coroutine(&a.base) {
                    self.awaited = true;
                    self.visit_expr_mut(&mut a.base);
                } else {
                    let message = "`.await` cannot be used in an #[entry] or #[suspend] method: \
                         only wsched suspension points wake a process, so any other future \
                         would never complete. Suspend with `yield_cmd!`, `yield_all!`, \
                         `recv!` or `call!`; `.await` is only for this impl's own #[suspend] and \
                         #[entry] methods (`self.helper(..).await`)";
                    let base = a.base.clone();
                    *expr = self.fail_await(span, message.into(), &base);
                }
            }
            Expr::Closure(_) => self.nested("a closure", |s| visit_mut::visit_expr_mut(s, expr)),
            Expr::Async(_) => self.nested("an async block", |s| visit_mut::visit_expr_mut(s, expr)),
            _ => visit_mut::visit_expr_mut(self, expr),
        }
    }

    fn visit_stmt_mut(&mut self, stmt: &mut Stmt) {
        if let Stmt::Macro(sm) = stmt {
            if dsl_name(&sm.mac).is_some() {
                let mut expr = Expr::Macro(ExprMacro {
                    attrs: std::mem::take(&mut sm.attrs),
                    mac: sm.mac.clone(),
                });
                let semi = sm.semi_token;
                self.visit_expr_mut(&mut expr);
                *stmt = Stmt::Expr(expr, semi);
                return;
            }
            self.lower_foreign(&mut sm.mac);
            return;
        }
        visit_mut::visit_stmt_mut(self, stmt);
    }

    /// `let name: Type = yield_cmd!(..);` (or `recv!`, `call!`), with a `Type` that
    /// may not be the `Result` the macro gives (no `?`): the value goes through
    /// `__private::outcome::<Type, _>`, whose bound says to add `?` or match on the
    /// `Result` where rustc's "mismatched types" would suggest an `.expect` inside
    /// the exported macro. An identity for a `Type` that is the `Result`.
    fn visit_local_mut(&mut self, local: &mut syn::Local) {
        let annotated = match (&local.pat, &local.init) {
            (syn::Pat::Type(typed), Some(init)) if !matches!(*typed.ty, Type::Infer(_)) => {
                gives_one_result(&init.expr).then(|| typed.ty.clone())
            }
            _ => None,
        };
        visit_mut::visit_local_mut(self, local);
        let (Some(ty), Some(init)) = (annotated, &mut local.init) else {
            return;
        };
        // Lowered, not replaced by an error's stand-in (an `unreachable!()`).
        let Expr::Macro(lowered) = &*init.expr else {
            return;
        };
        let is_lowered = matches!(
            lowered.mac.tokens.clone().into_iter().next(),
            Some(TokenTree::Punct(p)) if p.as_char() == '@'
        );
        if !is_lowered {
            return;
        }
        let span = lowered.mac.path.span();
        let lowered = lowered.clone();
        *init.expr = syn::parse_quote_spanned!(span=>
            ::wsched::__private::outcome::<#ty, _>(#lowered)
        );
    }

    /// Nested items (fns, impls, modules) are not part of the method: not visited. A DSL
    /// call there reaches the exported macro, whose error explains.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// Whether a plain method's body uses the DSL, for the error that suggests #[suspend].
pub(crate) fn check_plain(
    block: &mut syn::Block,
    method: String,
    awaitable: &BTreeMap<String, Role>,
    errors: &mut Errors,
) {
    Lower::new(Place::Plain, method, awaitable, errors).visit_block_mut(block);
}
