//! Code generation: the impl block with its entries and `#[suspend]` methods turned into
//! `async fn`s, plus the `IntoProcess` impl that starts them by name.

use std::collections::BTreeMap;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::ImplItem;

use crate::body::{self, Lower, Place};
use crate::model::{self, Entry, Errors, Model, Role};

/// The whole attribute: parse, check, expand. Errors come first, followed by the best
/// code that can be generated (so that one mistake does not cascade into others).
pub(crate) fn process(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let mut model = match model::parse(attr, item, &mut errors) {
        Ok(model) => model,
        Err(item) => {
            let errors = errors.into_compile_errors();
            return quote!(#errors #item);
        }
    };
    lower_methods(&mut model, &mut errors);
    let item = &model.item;
    // Made even when there are errors, so that spawns elsewhere that use them do
    // not add errors of their own.
    let typed_names = typed_names_impl(&model);
    if !errors.is_empty() {
        // Faulty calls were replaced by `unreachable!()`: no warnings about that.
        let errors = errors.into_compile_errors();
        return quote!(#errors #[allow(unreachable_code)] #item #typed_names);
    }
    let into_process = into_process_impl(&model);
    quote! {
        #item
        #typed_names
        #into_process
    }
}

/// The typed names of the entries: an associated constant of the struct for each,
/// `Entry<Self, (arguments…)>`, with the method's visibility. (None for an entry
/// whose arguments were refused, nor one whose name clashes: its type or its name
/// would repeat the error.)
fn typed_names_impl(model: &Model) -> TokenStream {
    let (impl_generics, _, where_clause) = model.item.generics.split_for_impl();
    let self_ty = &model.item.self_ty;
    let mut seen = Vec::new();
    let consts = model.entries.iter().filter_map(|entry| {
        if !entry.args_ok || seen.contains(&&entry.typed) || clashes(model, &entry.typed) {
            return None;
        }
        seen.push(&entry.typed);
        let Entry {
            name,
            ident,
            vis,
            typed,
            ..
        } = entry;
        let types = entry.args.iter().map(|(_, ty)| {
            let mut ty = ty.clone();
            StaticLifetimes.visit_type_mut(&mut ty);
            ty
        });
        let doc = format!(
            " The typed name of the entry `{name}` (`#[entry] fn {ident}`): spawn it with \
             `Self::{typed}` instead of `\"{name}\"`, and the compiler checks its \
             arguments, the tuple in this type (see `wsched::Entry`)."
        );
        Some(quote_spanned! {ident.span()=>
            #[doc = #doc]
            #[allow(dead_code)]
            #vis const #typed: ::wsched::Entry<Self, (#(#types,)*)> =
                ::wsched::Entry::new(#name);
        })
    });
    let consts: Vec<_> = consts.collect();
    if consts.is_empty() {
        return TokenStream::new();
    }
    quote! {
        impl #impl_generics #self_ty #where_clause {
            #(#consts)*
        }
    }
}

/// Whether the impl has an item of that name already (reported by the model).
fn clashes(model: &Model, typed: &syn::Ident) -> bool {
    model.item.items.iter().any(|item| match item {
        ImplItem::Const(c) => c.ident == *typed,
        ImplItem::Fn(f) => f.sig.ident == *typed,
        ImplItem::Type(t) => t.ident == *typed,
        _ => false,
    })
}

/// Makes the elided lifetimes of an argument type (`Cow<'_, str>`) `'static`, as
/// decoding infers them: a constant's type cannot elide them.
struct StaticLifetimes;

impl VisitMut for StaticLifetimes {
    fn visit_lifetime_mut(&mut self, lifetime: &mut syn::Lifetime) {
        if lifetime.ident == "_" {
            *lifetime = syn::Lifetime::new("'static", lifetime.span());
        }
    }
}

/// Makes entries and `#[suspend]` methods `async fn`s with lowered bodies; checks that
/// plain methods do not use the DSL.
fn lower_methods(model: &mut Model, errors: &mut Errors) {
    let awaitable: BTreeMap<String, Role> = model
        .item
        .items
        .iter()
        .zip(&model.roles)
        .filter_map(|(item, role)| match (item, role) {
            (ImplItem::Fn(f), Role::Entry | Role::Suspend) => {
                Some((f.sig.ident.to_string(), *role))
            }
            _ => None,
        })
        .collect();
    for (item, role) in model.item.items.iter_mut().zip(&model.roles) {
        let ImplItem::Fn(f) = item else { continue };
        let name = f.sig.ident.to_string();
        match role {
            Role::Plain => body::check_plain(&mut f.block, name, &awaitable, errors),
            Role::Entry | Role::Suspend => {
                let fn_span = f.sig.fn_token.span;
                f.sig.asyncness.get_or_insert(syn::Token![async](fn_span));
                Lower::new(Place::Coroutine, name, &awaitable, errors)
                    .visit_block_mut(&mut f.block);
            }
        }
    }
}

/// The hygienic names the generated code uses.
struct Names {
    /// The struct, moved into the coroutine.
    this: syn::Ident,
    /// The entry's index in the list of names.
    entry: syn::Ident,
    input: syn::Ident,
    args: syn::Ident,
    /// The decoded arguments, as the enum below.
    call: syn::Ident,
    /// The local enum with one variant per entry, holding its arguments.
    call_enum: syn::Ident,
}

impl Names {
    fn new() -> Self {
        let site = Span::mixed_site();
        let ident = |name: &str| syn::Ident::new(name, site);
        Self {
            this: ident("this"),
            entry: ident("entry"),
            input: ident("input"),
            args: ident("args"),
            call: ident("call"),
            // Items are not hygienic: a name no user type has, since the enum is
            // declared where the argument types are written.
            call_enum: ident("__WschedCall"),
        }
    }
}

/// The variables the arguments of `entry` are decoded into.
fn arg_vars(entry: &Entry) -> Vec<syn::Ident> {
    (0..entry.args.len())
        .map(|i| format_ident!("arg{}", i, span = Span::mixed_site()))
        .collect()
}

/// The arm of the entry with index `index` in `start`: decode the arguments into the
/// entry's variant of the call enum.
fn decode_arm(index: usize, entry: &Entry, names: &Names) -> TokenStream {
    let Names {
        input,
        args,
        call_enum,
        ..
    } = names;
    let name = &entry.name;
    let variant = &entry.ident;
    let count = entry.args.len();
    let vars = arg_vars(entry);
    let decode = if count == 0 {
        quote!(::wsched::__private::Args::new(#name, #input, 0)?;)
    } else {
        let lets = entry
            .args
            .iter()
            .zip(&vars)
            .map(|((arg, ty), var)| quote!(let #var = #args.next::<#ty>(#arg)?;));
        quote! {
            let mut #args = ::wsched::__private::Args::new(#name, #input, #count)?;
            #(#lets)*
        }
    };
    let index = proc_macro2::Literal::usize_unsuffixed(index);
    quote! {
        #index => {
            #decode
            #call_enum::#variant((#(#vars,)*))
        }
    }
}

/// The arm of `entry` in the coroutine: run it on the struct, make its result the
/// process's.
fn run_arm(entry: &Entry, names: &Names) -> TokenStream {
    let Names {
        this, call_enum, ..
    } = names;
    let method = &entry.ident;
    let vars = arg_vars(entry);
    let finish = if entry.fallible {
        quote_spanned!(entry.output_span=> ::wsched::__private::fallible)
    } else {
        quote_spanned!(entry.output_span=> ::wsched::__private::infallible)
    };
    // Spans: a result type that does not fit is reported on the return type (the
    // awaited expression); a coroutine that is not `Send` on the entry's name (the
    // call; rustc then shows the value and the suspension point).
    let call = quote_spanned!(method.span()=> Self::#method(&mut #this, #(#vars),*));
    let run = quote_spanned!(entry.output_span=> ::wsched::__private::send_entry(#call).await);
    quote! {
        #call_enum::#method((#(#vars,)*)) => #finish(#run),
    }
}

/// The `IntoProcess` impl: the machine, with the entries' names and the closure that
/// starts one of them. Its coroutine is one `async` block for all the entries, so
/// that the machine holds it inline whichever entry runs: its type, which has no
/// name, is inferred from the closure.
fn into_process_impl(model: &Model) -> TokenStream {
    let (impl_generics, _, where_clause) = model.item.generics.split_for_impl();
    let self_ty = &model.item.self_ty;
    let names = Names::new();
    let Names {
        this,
        entry,
        input,
        call,
        call_enum,
        ..
    } = &names;
    let entry_names = model.entries.iter().map(|e| &e.name);
    let variants = model.entries.iter().map(|e| &e.ident);
    let params: Vec<_> = (0..model.entries.len())
        .map(|i| format_ident!("A{}", i, span = Span::mixed_site()))
        .collect();
    let decode_arms = model
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| decode_arm(i, e, &names));
    let run_arms = model.entries.iter().map(|e| run_arm(e, &names));
    let coroutine = quote_spanned!(self_ty.span()=> async move {
        match #call {
            #(#run_arms)*
        }
    });
    quote! {
        #[automatically_derived]
        impl #impl_generics ::wsched::IntoProcess for #self_ty #where_clause {
            fn into_process(self) -> impl ::wsched::Process {
                // The decoded arguments of each entry; generic, since a local item
                // cannot name the impl's type parameters.
                #[allow(non_camel_case_types)]
                enum #call_enum<#(#params),*> {
                    #(#variants(#params)),*
                }
                ::wsched::__private::Machine::new(
                    self,
                    &[#(#entry_names),*],
                    |mut #this: Self, #entry: usize, #input: ::wsched::Payloads| {
                        let #call = match #entry {
                            #(#decode_arms)*
                            _ => ::core::unreachable!("the machine passes the index of an entry"),
                        };
                        ::core::result::Result::Ok(#coroutine)
                    },
                )
            }
        }
    }
}

/// For tests: the expansion of `#[process] item` as a file, for pretty-printing.
#[cfg(test)]
pub(crate) fn expand_to_file(item: TokenStream) -> syn::File {
    let tokens = process(TokenStream::new(), item);
    let items: Vec<syn::Item> = syn::parse2::<syn::File>(tokens)
        .expect("the expansion parses")
        .items;
    syn::File {
        shebang: None,
        attrs: Vec::new(),
        items,
    }
}
