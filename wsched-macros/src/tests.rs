//! Snapshot tests of the expansion, pretty-printed: a change in the generated code shows
//! up in review as a change of a `.snap` file under `src/snapshots/`.

use quote::quote;

use crate::expand::expand_to_file;

fn expand(item: proc_macro2::TokenStream) -> String {
    prettyplease::unparse(&expand_to_file(item))
}

/// The messages of the `compile_error!`s in `tokens`, in order.
fn compile_errors(tokens: proc_macro2::TokenStream) -> Vec<String> {
    let tokens: Vec<_> = tokens.into_iter().collect();
    let mut messages = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if let proc_macro2::TokenTree::Ident(id) = t {
            if id == "compile_error" {
                if let Some(proc_macro2::TokenTree::Group(g)) = tokens.get(i + 2) {
                    messages.push(g.stream().to_string());
                }
            }
        }
    }
    messages
}

macro_rules! snapshot {
    ($value:expr) => {
        insta::with_settings!({ omit_expression => true }, {
            insta::assert_snapshot!($value);
        })
    };
}

#[test]
fn one_entry_with_arguments_and_a_result() {
    snapshot!(expand(quote! {
        impl Greeter {
            #[entry]
            pub fn greet(&mut self, name: String, times: u32) -> Result<String, BoxError> {
                let page = yield_cmd!(Fetch { url: format!("/users/{name}") })?;
                let ack = recv!()?;
                self.greeted += times;
                Ok(format!("{page} {ack:?}"))
            }
        }
    }));
}

#[test]
fn renamed_entries_plain_values_and_no_arguments() {
    snapshot!(expand(quote! {
        impl Counter {
            #[entry(name = "count")]
            fn run(&mut self) -> u64 {
                while let Ok(n) = recv!(u64) {
                    self.total += n;
                }
                self.total
            }

            #[entry]
            fn reset(&mut self) {
                self.total = 0;
            }

            fn total(&self) -> u64 {
                self.total
            }
        }
    }));
}

#[test]
fn every_suspension_form_and_a_suspend_helper() {
    snapshot!(expand(quote! {
        impl<T: Send + 'static> Batch<T> {
            #[suspend]
            fn nap(&self, d: Duration) -> Result<(), YieldError> {
                yield_cmd!(Sleep(d))
            }

            #[entry]
            fn run(&mut self, urls: Vec<String>) -> Result<usize, BoxError> {
                let (a, b) = yield_cmd!(Fetch(urls[0].clone()), Sleep(Duration::ZERO));
                let pages = yield_all!(urls.iter().map(|u| Fetch(u.clone())));
                let m = recv!(String, timeout = Duration::from_secs(1));
                let n = recv!(timeout = Duration::ZERO);
                self.nap(Duration::from_millis(5)).await?;
                println!("{:?}", recv!(u8));
                let r: u32 = call!(self.server, Ask(1), timeout = Duration::from_secs(1))?;
                let s: Result<u32, _> = call!(self.server, Ask(r));
                Ok(pages.len())
            }
        }
    }));
}

#[test]
fn errors_are_reported_together() {
    let out = crate::expand::process(
        quote!(),
        quote! {
            impl Broken {
                #[entry]
                async fn a(&self, s: &str) {}

                #[entry(name = "a", typo = 1)]
                fn b<T>(&mut self) {
                    let f = || yield_cmd!(Sleep(d));
                    something().await;
                }

                fn plain(&mut self) {
                    recv!();
                }
            }
        },
    );
    let messages = compile_errors(out);
    snapshot!(messages.join("\n"));
}

#[test]
fn typed_names_follow_entry_names_visibility_and_elided_lifetimes() {
    snapshot!(expand(quote! {
        impl Fetcher {
            /// A name that is no identifier: the method's, in capitals.
            #[entry(name = "fetch-all")]
            pub(crate) fn fetch_all_pages(&mut self, key: Cow<'_, str>, limit: u32) {}

            #[entry]
            fn handleRequest(&mut self) {}

            #[entry]
            pub fn r#loop(&mut self, pid: Pid) {}
        }
    }));
}

#[test]
fn typed_names_that_clash_are_reported() {
    let out = crate::expand::process(
        quote!(),
        quote! {
            impl Clash {
                const RUN: u32 = 1;

                #[entry]
                fn run(&mut self) {}

                #[entry(name = "go_on")]
                fn a(&mut self) {}

                #[entry(name = "goOn")]
                fn b(&mut self) {}
            }
        },
    );
    let messages = compile_errors(out);
    snapshot!(messages.join("\n"));
}
