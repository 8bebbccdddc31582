//! Code generation: the impl block with its entries and `#[suspend]` methods turned into
//! `async fn`s, plus the `Entries` and `IntoProcess` impls that start them by name.

use std::collections::BTreeSet;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
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
    if !errors.is_empty() {
        // Faulty calls were replaced by `unreachable!()`: no warnings about that.
        let errors = errors.into_compile_errors();
        return quote!(#errors #[allow(unreachable_code)] #item);
    }
    let entries = entries_impl(&model);
    quote! {
        #item
        #entries
    }
}

/// Makes entries and `#[suspend]` methods `async fn`s with lowered bodies; checks that
/// plain methods do not use the DSL.
fn lower_methods(model: &mut Model, errors: &mut Errors) {
    let awaitable: BTreeSet<String> = model
        .item
        .items
        .iter()
        .zip(&model.roles)
        .filter_map(|(item, role)| match (item, role) {
            (ImplItem::Fn(f), Role::Entry | Role::Suspend) => Some(f.sig.ident.to_string()),
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

/// One arm of `start`: decode the arguments, build the coroutine.
fn entry_arm(entry: &Entry) -> TokenStream {
    let name = &entry.name;
    let method = &entry.ident;
    let site = Span::mixed_site();
    let input = quote_spanned!(site=> input);
    let args = quote_spanned!(site=> args);
    let this = quote_spanned!(site=> this);
    let count = entry.args.len();
    let vars: Vec<_> = (0..count)
        .map(|i| format_ident!("arg{}", i, span = site))
        .collect();
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
    let finish = if entry.fallible {
        quote_spanned!(entry.output_span=> ::wsched::__private::fallible)
    } else {
        quote_spanned!(entry.output_span=> ::wsched::__private::infallible)
    };
    // Spans: a result type that does not fit is reported on the return type; a
    // coroutine that is not `Send` on the entry's name (rustc then shows the value and
    // the suspension point).
    let at_output = syn::Ident::new(&method.to_string(), entry.output_span);
    let call = quote_spanned!(entry.output_span=> Self::#at_output(&mut #this, #(#vars),*).await);
    let start = quote_spanned!(method.span()=> ::wsched::__private::Body::new(#name, async move {
        let mut #this = self;
        #finish(#call)
    }));
    quote! {
        #name => {
            #decode
            ::core::result::Result::Ok(#start)
        }
    }
}

/// The `Entries` and `IntoProcess` impls.
fn entries_impl(model: &Model) -> TokenStream {
    let (impl_generics, _, where_clause) = model.item.generics.split_for_impl();
    let self_ty = &model.item.self_ty;
    let names = model.entries.iter().map(|e| &e.name);
    let arms = model.entries.iter().map(entry_arm);
    let site = Span::mixed_site();
    let entry = quote_spanned!(site=> entry);
    let input = quote_spanned!(site=> input);
    quote! {
        #[automatically_derived]
        impl #impl_generics ::wsched::__private::Entries for #self_ty #where_clause {
            const ENTRIES: &'static [&'static str] = &[#(#names),*];

            fn start(
                self,
                #entry: &str,
                #input: ::wsched::Payloads,
            ) -> ::core::result::Result<::wsched::__private::Body, ::wsched::InitError> {
                match #entry {
                    #(#arms)*
                    _ => ::core::result::Result::Err(
                        ::wsched::__private::unknown_entry(#entry, Self::ENTRIES),
                    ),
                }
            }
        }

        #[automatically_derived]
        impl #impl_generics ::wsched::IntoProcess for #self_ty #where_clause {
            type Process = ::wsched::__private::Machine<Self>;

            fn into_process(self) -> Self::Process {
                ::wsched::__private::Machine::new(self)
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
