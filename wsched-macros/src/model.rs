//! Parse and check: from the `impl` block to the model of a process, collecting every
//! mistake (several are reported together).

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, ImplItem, ImplItemFn, Item, ItemImpl, LitStr, Pat, ReturnType, Type};

/// Accumulates errors; `syn::Error::combine` reports them all at once.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(e) => e.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn at(&mut self, tokens: impl ToTokens, message: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    pub(crate) fn span(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub(crate) fn into_compile_errors(self) -> TokenStream {
        self.0.map(|e| e.to_compile_error()).unwrap_or_default()
    }
}

/// What a method of the impl is to the macro.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Role {
    Entry,
    Suspend,
    Plain,
}

/// One `#[entry]` method.
pub(crate) struct Entry {
    /// The name it is started by.
    pub(crate) name: String,
    /// The method's identifier.
    pub(crate) ident: syn::Ident,
    /// Each argument: its name for messages, and its type.
    pub(crate) args: Vec<(String, Type)>,
    /// Whether the return type is a `Result` (whose `Err` ends the process).
    pub(crate) fallible: bool,
    /// The span of the return type (or of the signature when there is none).
    pub(crate) output_span: Span,
    /// The method's visibility, which its typed name gets too.
    pub(crate) vis: syn::Visibility,
    /// The associated constant that names it, typed (`RUN` for `fn run`).
    pub(crate) typed: syn::Ident,
    /// Whether every argument type can be decoded (else no typed name is made:
    /// its type would repeat the error).
    pub(crate) args_ok: bool,
}

/// The checked model of a `#[process]` impl.
pub(crate) struct Model {
    pub(crate) item: ItemImpl,
    /// For each `ImplItem` of `item`, its role (non-fn items are `Plain`).
    pub(crate) roles: Vec<Role>,
    pub(crate) entries: Vec<Entry>,
}

fn is_attr(attr: &Attribute, name: &str) -> bool {
    attr.path().is_ident(name)
}

/// Parses `#[entry]` / `#[entry(name = "...")]`: the name, if given.
fn entry_name(attr: &Attribute, errors: &mut Errors) -> Option<LitStr> {
    let mut name: Option<LitStr> = None;
    match &attr.meta {
        syn::Meta::Path(_) => {}
        syn::Meta::NameValue(nv) => {
            errors.at(nv, "expected `#[entry]` or `#[entry(name = \"...\")]`")
        }
        syn::Meta::List(list) => {
            let result = list.parse_nested_meta(|meta| {
                if meta.path.is_ident("name") {
                    let lit: LitStr = meta.value()?.parse()?;
                    if name.is_some() {
                        errors.at(&lit, "`name` is given twice");
                    } else if lit.value().is_empty() {
                        errors.at(&lit, "an entry name cannot be empty");
                    } else {
                        name = Some(lit);
                    }
                    Ok(())
                } else {
                    Err(meta.error("unknown #[entry] argument; the only one is `name = \"...\"`"))
                }
            });
            if let Err(e) = result {
                errors.push(e);
            }
        }
    }
    name
}

/// The role an `#[entry]` / `#[suspend]` attribute gives, with the attributes removed.
fn take_role(attrs: &mut Vec<Attribute>, errors: &mut Errors) -> (Role, Option<LitStr>) {
    let mut role = Role::Plain;
    let mut name = None;
    let mut first: Option<&'static str> = None;
    attrs.retain(|attr| {
        let this = if is_attr(attr, "entry") {
            "entry"
        } else if is_attr(attr, "suspend") {
            "suspend"
        } else {
            return true;
        };
        match first {
            Some(prev) if prev == this => errors.at(attr, format!("duplicate #[{this}]")),
            Some(prev) => errors.at(
                attr,
                format!(
                    "a method is either #[entry] or #[suspend], not both (it is already #[{prev}])"
                ),
            ),
            None => {
                first = Some(this);
                if this == "entry" {
                    role = Role::Entry;
                    name = entry_name(attr, errors);
                } else {
                    role = Role::Suspend;
                    if !matches!(attr.meta, syn::Meta::Path(_)) {
                        errors.at(attr, "#[suspend] takes no arguments");
                    }
                }
            }
        }
        false
    });
    (role, name)
}

fn check_common(f: &ImplItemFn, what: &str, errors: &mut Errors) {
    let sig = &f.sig;
    if let Some(a) = &sig.asyncness {
        errors.at(
            a,
            format!(
                "{what} must not be `async`: #[process] turns it into a coroutine itself; \
                 remove `async`"
            ),
        );
    }
    if let Some(c) = &sig.constness {
        errors.at(c, format!("{what} cannot be `const`"));
    }
    if let Some(u) = &sig.unsafety {
        errors.at(u, format!("{what} cannot be `unsafe`"));
    }
    if let Some(abi) = &sig.abi {
        errors.at(abi, format!("{what} cannot have an `extern` ABI"));
    }
    if let Some(v) = &sig.variadic {
        errors.at(v, format!("{what} cannot be variadic"));
    }
}

/// A name for an argument in messages: its identifier, or its pattern as written.
fn arg_name(pat: &Pat) -> String {
    match pat {
        Pat::Ident(p) => p.ident.to_string(),
        other => other.to_token_stream().to_string(),
    }
}

/// Whether `ty` can be an entry's argument; reports why not.
fn check_arg_type(ty: &Type, errors: &mut Errors) -> bool {
    match ty {
        Type::Reference(r) if r.lifetime.as_ref().is_some_and(|l| l.ident == "static") => true,
        Type::Reference(_) => {
            errors.at(
                ty,
                "entry arguments are decoded from owned input payloads: take an owned type \
                 (e.g. `String` instead of `&str`, `Vec<T>` instead of `&[T]`) or a \
                 `&'static` reference",
            );
            false
        }
        Type::ImplTrait(_) => {
            errors.at(
                ty,
                "entry arguments are decoded from input payloads by type: `impl Trait` cannot \
                 be decoded; name a concrete type",
            );
            false
        }
        Type::Paren(p) => check_arg_type(&p.elem, errors),
        Type::Group(g) => check_arg_type(&g.elem, errors),
        // rustc reports `_` on the method; the typed name would repeat it.
        Type::Infer(_) => false,
        _ => true,
    }
}

/// The name of an entry's typed name: the entry's name in capitals, words split by
/// `_` (`run` → `RUN`, `handle_request` → `HANDLE_REQUEST`, `fetchAll` →
/// `FETCH_ALL`); the method's, so made, when the entry's name is no identifier
/// (`#[entry(name = "fetch-all")]`). Spanned on `span`.
pub(crate) fn typed_name(name: &str, method: &syn::Ident, span: Span) -> syn::Ident {
    fn capitals(text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 4);
        let mut previous_lower = false;
        for c in text.chars() {
            if c.is_uppercase() && previous_lower {
                out.push('_');
            }
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
            out.extend(c.to_uppercase());
        }
        out
    }
    let method = method.to_string();
    let method = capitals(method.strip_prefix("r#").unwrap_or(&method));
    let identifier = name
        .chars()
        .next()
        .is_some_and(|c| c == '_' || c.is_alphabetic())
        && name.chars().all(|c| c == '_' || c.is_alphanumeric());
    let text = Some(capitals(name))
        .filter(|text| identifier && text != "_" && syn::parse_str::<syn::Ident>(text).is_ok())
        .unwrap_or(method);
    syn::Ident::new(&text, span)
}

/// Whether a return type is a `Result`: its last path segment is named `Result`
/// (`Result<T, E>`, `std::result::Result<T, E>`, `io::Result<T>`, `anyhow::Result<T>`).
fn is_result(ty: &Type) -> bool {
    match ty {
        Type::Path(p) if p.qself.is_none() => {
            p.path.segments.last().is_some_and(|s| s.ident == "Result")
        }
        Type::Paren(p) => is_result(&p.elem),
        Type::Group(g) => is_result(&g.elem),
        _ => false,
    }
}

fn check_entry(f: &ImplItemFn, name: Option<LitStr>, errors: &mut Errors) -> Entry {
    let sig = &f.sig;
    check_common(f, "an #[entry] method", errors);
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.at(
            &sig.generics,
            "an #[entry] method cannot be generic: its arguments are decoded from payloads \
             by a name chosen at run time, so their types must be concrete",
        );
    }
    let mut inputs = sig.inputs.iter();
    match inputs.next() {
        Some(FnArg::Receiver(r))
            if r.reference.as_ref().is_some_and(|(_, lt)| lt.is_none())
                && r.mutability.is_some()
                && r.colon_token.is_none() => {}
        Some(FnArg::Receiver(r)) => errors.at(
            r,
            "an #[entry] method takes `&mut self`: the process owns its state while the \
             entry runs",
        ),
        _ => errors.span(
            sig.ident.span(),
            "an #[entry] method takes `&mut self` as its first parameter",
        ),
    }
    let mut args = Vec::new();
    let mut args_ok = true;
    for input in inputs {
        match input {
            FnArg::Typed(pt) => {
                args_ok &= check_arg_type(&pt.ty, errors);
                args.push((arg_name(&pt.pat), (*pt.ty).clone()));
            }
            FnArg::Receiver(r) => {
                errors.at(r, "unexpected receiver");
                args_ok = false;
            }
        }
    }
    let (fallible, output_span) = match &sig.output {
        ReturnType::Default => (false, sig.ident.span()),
        ReturnType::Type(_, ty) => (is_result(ty), ty.span()),
    };
    let name_str = name
        .as_ref()
        .map_or_else(|| sig.ident.to_string(), LitStr::value);
    let name_span = name.as_ref().map_or(sig.ident.span(), LitStr::span);
    let typed = typed_name(&name_str, &sig.ident, name_span);
    Entry {
        name: name_str,
        ident: sig.ident.clone(),
        args,
        fallible,
        output_span,
        vis: f.vis.clone(),
        typed,
        args_ok,
    }
}

fn check_suspend(f: &ImplItemFn, errors: &mut Errors) {
    check_common(f, "a #[suspend] method", errors);
    if let Some(FnArg::Receiver(r)) = f.sig.inputs.first() {
        if r.reference.is_none() {
            errors.at(
                r,
                "a #[suspend] method takes `&mut self`, `&self` or no receiver: it runs \
                 inside an entry, which only borrows the process",
            );
        }
    }
}

/// Parses the attribute's input and checks it. `Err` carries the errors and, when the
/// item is at least an inherent impl, the best-effort model to emit along with them.
pub(crate) fn parse(
    attr: TokenStream,
    item: TokenStream,
    errors: &mut Errors,
) -> Result<Model, Option<Box<Item>>> {
    if !attr.is_empty() {
        errors.at(&attr, "#[process] takes no arguments");
    }
    let item: Item = match syn::parse2(item) {
        Ok(item) => item,
        Err(e) => {
            errors.push(e);
            return Err(None);
        }
    };
    let mut item = match item {
        Item::Impl(i) if i.trait_.is_none() => i,
        Item::Impl(i) => {
            let (_, path, _) = i.trait_.as_ref().expect("checked above");
            errors.at(
                path,
                "#[process] goes on an inherent impl block (`impl MyProcess { ... }`), \
                 not on a trait impl",
            );
            return Err(Some(Box::new(Item::Impl(i))));
        }
        Item::Struct(s) => {
            errors.span(
                s.ident.span(),
                format!(
                    "#[process] goes on the impl block of the struct, not on the struct: \
                     write `#[process] impl {} {{ ... }}`",
                    s.ident
                ),
            );
            return Err(Some(Box::new(Item::Struct(s))));
        }
        other => {
            errors.span(
                Span::call_site(),
                "#[process] goes on an inherent impl block (`impl MyProcess { ... }`) \
                 whose #[entry] methods can be started by name",
            );
            return Err(Some(Box::new(other)));
        }
    };

    let mut roles = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    let mut name_spans: Vec<Span> = Vec::new();
    for impl_item in &mut item.items {
        let ImplItem::Fn(f) = impl_item else {
            for attr in impl_item_attrs(impl_item) {
                if is_attr(attr, "entry") || is_attr(attr, "suspend") {
                    errors.at(attr, "#[entry] and #[suspend] go on methods");
                }
            }
            roles.push(Role::Plain);
            continue;
        };
        let (role, name) = take_role(&mut f.attrs, errors);
        match role {
            Role::Entry => {
                let span = name.as_ref().map_or(f.sig.ident.span(), LitStr::span);
                let entry = check_entry(f, name, errors);
                if let Some(i) = entries.iter().position(|e| e.name == entry.name) {
                    let mut e = syn::Error::new(
                        span,
                        format!("duplicate entry name `{}`: entries are started by name, which must be unique", entry.name),
                    );
                    e.combine(syn::Error::new(
                        name_spans[i],
                        format!("the first entry named `{}` is here", entry.name),
                    ));
                    errors.push(e);
                }
                name_spans.push(span);
                entries.push(entry);
            }
            Role::Suspend => check_suspend(f, errors),
            Role::Plain => {}
        }
        roles.push(role);
    }
    check_typed_names(&item, &entries, errors);
    if entries.is_empty() {
        errors.at(
            &item.self_ty,
            "this #[process] impl has no entry: mark the methods that can be started by \
             name with #[entry]",
        );
    }
    Ok(Model {
        item,
        roles,
        entries,
    })
}

/// The typed names of the entries must not clash with each other or with the
/// impl's own constants, methods and types (which share their namespace).
fn check_typed_names(item: &ItemImpl, entries: &[Entry], errors: &mut Errors) {
    for (i, entry) in entries.iter().enumerate() {
        let typed = entry.typed.to_string();
        if let Some(other) = entries[..i].iter().find(|e| e.typed == entry.typed) {
            if other.name == entry.name {
                // A duplicate name, reported as such.
                continue;
            }
            errors.span(
                entry.typed.span(),
                format!(
                    "entries `{}` and `{}` would both have the typed name `Self::{typed}` \
                     (an entry's name in capitals): rename one",
                    other.name, entry.name
                ),
            );
            continue;
        }
        let clash = item.items.iter().any(|impl_item| match impl_item {
            ImplItem::Const(c) => c.ident == typed,
            ImplItem::Fn(f) => f.sig.ident == typed,
            ImplItem::Type(t) => t.ident == typed,
            _ => false,
        });
        if clash {
            errors.span(
                entry.typed.span(),
                format!(
                    "the typed name of entry `{}` is `Self::{typed}` (its name in capitals, \
                     for spawns whose arguments the compiler checks), but this impl already \
                     has an item `{typed}`: rename one of them",
                    entry.name
                ),
            );
        }
    }
}

fn impl_item_attrs(item: &ImplItem) -> &[Attribute] {
    match item {
        ImplItem::Const(c) => &c.attrs,
        ImplItem::Type(t) => &t.attrs,
        ImplItem::Macro(m) => &m.attrs,
        ImplItem::Fn(f) => &f.attrs,
        _ => &[],
    }
}
