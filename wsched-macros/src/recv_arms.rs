//! `recv!` with arms, Erlang's `receive`: parse, check, expand.
//!
//! ```text
//! recv! {
//!     Report { id, .. } if id > 3 => handle(id),
//!     Down { monitor, reason, .. } if monitor == watched => stop(reason),
//!     n: u32 => count(n),
//!     after(Duration::from_secs(1)) => idle(),
//! }
//! ```
//!
//! Each arm names a message type (`pattern: Type`, or a struct, tuple-struct or unit
//! struct pattern, whose path is its type), a pattern, an optional guard and a body;
//! `after(d) => body`, at most once, is the timeout arm. One suspension point waits
//! for the oldest message that some arm takes (the first such arm, in order, takes
//! it); a message no arm takes stays in the mailbox, in order.
//!
//! The expansion is one `recv_select` receive with two closures: one looks at a
//! message's type, the other tries the arms on it by value (so a guard sees its
//! bindings as values, as in a `match`), and gives it back untouched if none takes
//! it. The chosen arm's bindings travel out as a tuple in a local enum, and the
//! bodies run in a `match` on it, in the entry itself: a body may suspend, `return`
//! or use `?`. The whole evaluates to `Result<R, RecvError>` (`R`, the bodies'
//! type), `Err` only for a cancel or a timer that could not be armed.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Expr, Ident, Pat, Token, Type};

/// Whether a `recv!`'s tokens are the arms form: a `=>` at their top level.
pub(crate) fn is_arms(tokens: &TokenStream) -> bool {
    let mut previous_eq = false;
    for token in tokens.clone() {
        match &token {
            TokenTree::Punct(p) if p.as_char() == '>' && previous_eq => return true,
            TokenTree::Punct(p) => {
                previous_eq = p.as_char() == '=' && p.spacing() == proc_macro2::Spacing::Joint
            }
            _ => previous_eq = false,
        }
    }
    false
}

/// One arm that takes a message.
pub(crate) struct Arm {
    pub(crate) pat: Pat,
    pub(crate) ty: Type,
    pub(crate) guard: Option<Expr>,
    pub(crate) body: Expr,
    /// The pattern's bindings, with their `mut`, in the order written.
    bindings: Vec<(Ident, bool)>,
}

/// The timeout arm: `after(d) => body`.
pub(crate) struct After {
    pub(crate) timeout: Expr,
    pub(crate) body: Expr,
}

/// A parsed `recv!` with arms.
pub(crate) struct Arms {
    pub(crate) arms: Vec<Arm>,
    pub(crate) after: Option<After>,
}

const FORM: &str = "recv! { pattern: Type if guard => body, …, after(duration) => body }";

impl Parse for Arms {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut arms = Vec::new();
        let mut after: Option<After> = None;
        while !input.is_empty() {
            if input.peek(Ident)
                && input.peek2(syn::token::Paren)
                && input.fork().parse::<Ident>()? == "after"
            {
                let keyword: Ident = input.parse()?;
                if after.is_some() {
                    return Err(syn::Error::new(
                        keyword.span(),
                        "a `recv!` has at most one `after(duration) => …` arm",
                    ));
                }
                let content;
                syn::parenthesized!(content in input);
                let timeout: Expr = content.parse()?;
                input.parse::<Token![=>]>()?;
                let body = parse_body(input)?;
                after = Some(After { timeout, body });
                continue;
            }
            let pat = Pat::parse_multi_with_leading_vert(input)?;
            let ty = if input.peek(Token![:]) && !input.peek(Token![::]) {
                input.parse::<Token![:]>()?;
                input.parse::<Type>()?
            } else {
                type_of(&pat)?
            };
            let guard = if input.peek(Token![if]) {
                input.parse::<Token![if]>()?;
                Some(input.parse::<Expr>()?)
            } else {
                None
            };
            if !input.peek(Token![=>]) {
                return Err(input.error(format!("expected `=>` after the arm's pattern: {FORM}")));
            }
            input.parse::<Token![=>]>()?;
            let body = parse_body(input)?;
            let mut bindings = Vec::new();
            collect_bindings(&pat, &mut bindings)?;
            arms.push(Arm {
                pat,
                ty,
                guard,
                body,
                bindings,
            });
        }
        if arms.is_empty() {
            return Err(input.error(format!(
                "a `recv!` with arms needs an arm that takes a message: {FORM}"
            )));
        }
        Ok(Self { arms, after })
    }
}

/// An arm's body, and the comma after it (optional after a block, and at the end).
fn parse_body(input: ParseStream) -> syn::Result<Expr> {
    let body: Expr = input.parse()?;
    let block_like = matches!(
        body,
        Expr::Block(_)
            | Expr::If(_)
            | Expr::Match(_)
            | Expr::Loop(_)
            | Expr::While(_)
            | Expr::ForLoop(_)
            | Expr::Unsafe(_)
    );
    if input.peek(Token![,]) {
        input.parse::<Token![,]>()?;
    } else if !input.is_empty() && !block_like {
        return Err(input.error("expected `,` after the arm's body"));
    }
    Ok(body)
}

/// The message type a pattern names by itself: a struct, tuple-struct or unit
/// struct pattern's path.
fn type_of(pat: &Pat) -> syn::Result<Type> {
    let path = match pat {
        Pat::Struct(p) => Some((&p.qself, &p.path)),
        Pat::TupleStruct(p) => Some((&p.qself, &p.path)),
        Pat::Path(p) => Some((&p.qself, &p.path)),
        Pat::Ident(p) => {
            if let Some((_, sub)) = &p.subpat {
                return type_of(sub);
            }
            // A capitalised lone name is a unit struct (`Stop => …`).
            if p.by_ref.is_none() && p.mutability.is_none() && !is_binding(&p.ident) {
                return Ok(Type::Path(syn::TypePath {
                    qself: None,
                    path: p.ident.clone().into(),
                }));
            }
            None
        }
        Pat::Paren(p) => return type_of(&p.pat),
        _ => None,
    };
    match path {
        Some((qself, path)) => Ok(Type::Path(syn::TypePath {
            qself: qself.clone(),
            path: path.clone(),
        })),
        None => Err(syn::Error::new(
            pat.span(),
            "this `recv!` arm needs its message's type: write `pattern: Type` (for example \
             `n: u32 if n > 5 => …`); a struct, tuple-struct or unit-struct pattern \
             (`Report { id, .. }`) names its type itself",
        )),
    }
}

/// Removes `mut` from the bindings of `pat`.
fn strip_mut(pat: &mut Pat) {
    struct Strip;
    impl syn::visit_mut::VisitMut for Strip {
        fn visit_pat_ident_mut(&mut self, p: &mut syn::PatIdent) {
            p.mutability = None;
            syn::visit_mut::visit_pat_ident_mut(self, p);
        }
    }
    syn::visit_mut::VisitMut::visit_pat_mut(&mut Strip, pat);
}

/// Whether a lone identifier in a pattern binds: lowercase or `_`-prefixed (not
/// `_` itself); a capitalised one is a unit struct, a variant or a constant.
fn is_binding(ident: &Ident) -> bool {
    let name = ident.to_string();
    name != "_"
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_lowercase() || c == '_')
}

/// The bindings of `pat`, in order. A lowercase (or `_`-prefixed) lone identifier
/// is a binding; a capitalised one is a unit struct, variant or constant.
fn collect_bindings(pat: &Pat, out: &mut Vec<(Ident, bool)>) -> syn::Result<()> {
    match pat {
        Pat::Ident(p) => {
            if p.by_ref.is_some() {
                return Err(syn::Error::new(
                    p.by_ref.span(),
                    "a `recv!` arm binds by value (the message is its own): drop `ref`",
                ));
            }
            if is_binding(&p.ident) || p.subpat.is_some() {
                out.push((p.ident.clone(), p.mutability.is_some()));
            }
            if let Some((_, sub)) = &p.subpat {
                collect_bindings(sub, out)?;
            }
        }
        Pat::Struct(p) => {
            for field in &p.fields {
                collect_bindings(&field.pat, out)?;
            }
        }
        Pat::TupleStruct(p) => {
            for elem in &p.elems {
                collect_bindings(elem, out)?;
            }
        }
        Pat::Tuple(p) => {
            for elem in &p.elems {
                collect_bindings(elem, out)?;
            }
        }
        Pat::Slice(p) => {
            for elem in &p.elems {
                collect_bindings(elem, out)?;
            }
        }
        // Every alternative binds the same names (rustc checks it).
        Pat::Or(p) => {
            if let Some(first) = p.cases.first() {
                collect_bindings(first, out)?;
            }
        }
        Pat::Paren(p) => collect_bindings(&p.pat, out)?,
        Pat::Reference(p) => collect_bindings(&p.pat, out)?,
        Pat::Type(p) => collect_bindings(&p.pat, out)?,
        _ => {}
    }
    Ok(())
}

impl Arms {
    /// The expansion: a block that evaluates to `Result<R, RecvError>`. The arms'
    /// guards and bodies must have been lowered already.
    pub(crate) fn expand(&self, span: Span) -> Expr {
        let variants: Vec<Ident> = (0..self.arms.len())
            .map(|i| format_ident!("A{i}"))
            .collect();
        let enum_name = Ident::new("__WschedRecvArm", span);
        let message = Ident::new("__wsched_message", span);
        let value = Ident::new("__wsched_value", span);
        let bound = Ident::new("__wsched_bound", span);
        let result = quote_spanned!(span=> ::core::result::Result);
        let types: Vec<&Type> = self.arms.iter().map(|a| &a.ty).collect();
        let name = types
            .iter()
            .map(|t| t.to_token_stream().to_string().replace(' ', ""))
            .collect::<Vec<_>>()
            .join(" | ");
        let tries = self.arms.iter().zip(&variants).map(|(arm, variant)| {
            // Here the bindings only move into the tuple: `mut` is for the body's.
            let mut pat = arm.pat.clone();
            strip_mut(&mut pat);
            let ty = &arm.ty;
            let guard = arm.guard.as_ref().map(|g| quote!(if #g));
            let names = arm.bindings.iter().map(|(n, _)| n);
            quote_spanned! {span=>
                let #message = match ::wsched::__private::recv_arm::<#ty, _>(#message, |#value: #ty| {
                    // A pattern that takes every `T` leaves the last arm unreachable.
                    #[allow(unused_variables, unreachable_patterns)]
                    match #value {
                        #pat #guard => #result::Ok((#(#names,)*)),
                        #value => #result::Err(#value),
                    }
                }) {
                    #result::Ok(#bound) => return #result::Ok(#enum_name::#variant(#bound)),
                    #result::Err(#message) => #message,
                };
            }
        });
        let outcomes = self.arms.iter().zip(&variants).map(|(arm, variant)| {
            let bindings = arm
                .bindings
                .iter()
                .map(|(n, m)| if *m { quote!(mut #n) } else { quote!(#n) });
            let names = arm.bindings.iter().map(|(n, _)| n);
            let body = &arm.body;
            // An arm's body may leave the entry (`return`, `?`, `break`): its `Ok`
            // is then unreachable, which is the body's business, not a warning.
            quote_spanned! {span=>
                #[allow(unreachable_code)]
                #result::Ok(#enum_name::#variant((#(#bindings,)*))) => {
                    // A binding the guard used and the body does not is no warning.
                    let _ = (#(&#names,)*);
                    #result::Ok(#body)
                }
            }
        });
        let (timeout, after) = match &self.after {
            Some(After { timeout, body }) => (
                quote!(::core::option::Option::Some(::wsched::__private::timeout(#timeout))),
                quote_spanned! {span=>
                    #[allow(unreachable_code)]
                    #result::Err(::wsched::RecvError::Timeout) => #result::Ok(#body),
                },
            ),
            None => (quote!(::core::option::Option::None), TokenStream::new()),
        };
        // `a || b || …`: at least one arm takes a message (the parser checked).
        let type_check = types
            .iter()
            .map(|ty| quote!(#message.payload.is::<#ty>()))
            .reduce(|a, b| quote!(#a || #b))
            .expect("an arm");
        let generics = &variants;
        let generics_infer = variants.iter().map(|_| quote!(_));
        syn::parse_quote_spanned! {span=> {
            #[allow(non_camel_case_types, clippy::enum_variant_names)]
            enum #enum_name<#(#generics),*> { #(#variants(#generics)),* }
            match ::wsched::__private::recv_select(
                #timeout,
                #name,
                |#message: &::wsched::Message| #type_check,
                |#message: ::wsched::Message| -> #result<#enum_name<#(#generics_infer),*>, ::wsched::Message> {
                    #(#tries)*
                    #result::Err(#message)
                },
            ).await {
                #(#outcomes)*
                #after
                #result::Err(__wsched_error) => #result::Err(__wsched_error),
            }
        }}
    }
}
