//! The runtime's layers import one way.
//!
//! `wsched/src/` is cut into layers: each top-level folder is one (`engine/`,
//! `time/`, `command/`, …), a folder's `mod.rs` (or the file beside it, as
//! `testing.rs`) says in one line which layers it may use (`May use: `engine`, the
//! crate root.`), and the files at the top of `src/` are the crate root, the
//! vocabulary every layer speaks (`Pid`, `Payload`, `ExitReason`, the errors).
//!
//! This test reads the crate's source the way the compiler finds it (from `lib.rs`,
//! following `mod` declarations), resolves every path that starts with `crate`,
//! `super` or `self` — in `use` items and in code — through the crate's re-exports to
//! the file that defines what it names, and fails, naming the file and line, on any
//! path that reaches a layer its own may not use. It also fails when the declared
//! "may use" lines form a circle, so no import circle between layers can exist.
//!
//! Test code (`#[cfg(test)]`) is exempt: a test may reach anything it checks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Files outside every layer: the crate's public face, which re-exports each layer's
/// public items, and the benchmarks' window onto crate-private structures.
const FACADES: &[&str] = &["lib.rs", "bench_internals.rs"];

/// The crate root's layer: the files at the top of `src/`.
const ROOT: &str = "the crate root";

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../wsched/src")
}

/// One source file and the module path it is compiled as.
struct SourceFile {
    /// Relative to `src/`, with `/` separators.
    rel: String,
    module: Vec<String>,
    syntax: syn::File,
}

/// Reads the crate as the compiler does: `lib.rs`, then every `mod x;` it declares
/// (honouring `#[path]`), except modules compiled only for tests.
fn read_crate() -> Vec<SourceFile> {
    let mut files = Vec::new();
    load(&src_dir().join("lib.rs"), Vec::new(), &mut files);
    files
}

fn load(path: &Path, module: Vec<String>, files: &mut Vec<SourceFile>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rel = path
        .strip_prefix(src_dir())
        .expect("inside src/")
        .to_string_lossy()
        .replace('\\', "/");
    // Where `mod x;` looks for x: beside lib.rs and mod.rs, else in a folder named
    // after this file.
    let name = path.file_name().unwrap().to_string_lossy();
    let dir = if name == "lib.rs" || name == "mod.rs" {
        path.parent().unwrap().to_path_buf()
    } else {
        path.with_extension("")
    };
    let mut children = Vec::new();
    collect_mod_files(&syntax.items, &dir, &module, &mut children);
    files.push(SourceFile {
        rel,
        module,
        syntax,
    });
    for (child_path, child_module) in children {
        load(&child_path, child_module, files);
    }
}

fn collect_mod_files(
    items: &[syn::Item],
    dir: &Path,
    module: &[String],
    out: &mut Vec<(PathBuf, Vec<String>)>,
) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        if is_test_only(&m.attrs) {
            continue;
        }
        let mut child = module.to_vec();
        child.push(m.ident.to_string());
        match &m.content {
            Some((_, inner)) => {
                collect_mod_files(inner, &dir.join(m.ident.to_string()), &child, out)
            }
            None => {
                let explicit = m.attrs.iter().find_map(|a| {
                    let syn::Meta::NameValue(nv) = &a.meta else {
                        return None;
                    };
                    if !nv.path.is_ident("path") {
                        return None;
                    }
                    let syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) = &nv.value
                    else {
                        return None;
                    };
                    Some(dir.join(s.value()))
                });
                let path = explicit.unwrap_or_else(|| {
                    let flat = dir.join(format!("{}.rs", m.ident));
                    if flat.exists() {
                        flat
                    } else {
                        dir.join(m.ident.to_string()).join("mod.rs")
                    }
                });
                out.push((path, child));
            }
        }
    }
}

/// `#[cfg(test)]`, `#[cfg(loom)]` and the like: compiled only to test the crate.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            // `test`, `loom`, `all(test, not(loom))`, …: any cfg that needs a test
            // build (a `not(test)` alone does not).
            a.meta.require_list().is_ok_and(|l| {
                let tokens = l.tokens.to_string();
                ["test", "loom", "doctest"].iter().any(|word| {
                    tokens
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .any(|w| w == *word)
                }) && !tokens.starts_with("not")
            })
        }
    })
}

/// A path as written, where it was written, and the module it was written in.
struct Reference {
    path: Vec<String>,
    line: usize,
    scope: Vec<String>,
}

/// A name re-exported by a module: (module, name) and the path it stands for.
type Reexport = ((Vec<String>, String), Vec<String>);

/// What one file says: the paths it uses and the names it re-exports.
#[derive(Default)]
struct FileFacts {
    references: Vec<Reference>,
    /// (module, name) → the path it re-exports, as written in that module.
    reexports: Vec<Reexport>,
    /// Inline modules: their paths, so a name inside them resolves to this file.
    inline_modules: Vec<Vec<String>>,
}

struct Collector<'a> {
    facts: &'a mut FileFacts,
    scope: Vec<String>,
}

impl Collector<'_> {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, public: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, public);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut path = prefix.clone();
                if name != "self" {
                    path.push(name.clone());
                }
                let alias = if name == "self" {
                    prefix.last().cloned().unwrap_or_default()
                } else {
                    name
                };
                self.record_use(path, alias, n.ident.span(), public);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                self.record_use(path, r.rename.to_string(), r.ident.span(), public);
            }
            syn::UseTree::Glob(g) => {
                self.record_use(prefix.clone(), String::new(), g.star_token.span, false);
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree, public);
                }
            }
        }
    }

    fn record_use(
        &mut self,
        path: Vec<String>,
        alias: String,
        span: proc_macro2::Span,
        public: bool,
    ) {
        if path.is_empty() {
            return;
        }
        if public && !alias.is_empty() {
            self.facts
                .reexports
                .push(((self.scope.clone(), alias), path.clone()));
        }
        self.facts.references.push(Reference {
            path,
            line: span.start().line,
            scope: self.scope.clone(),
        });
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if is_test_only(attrs) {
            return;
        }
        match item {
            syn::Item::Mod(m) => {
                // A `mod x;` is a file of its own, read on its own.
                if let Some((_, items)) = &m.content {
                    self.scope.push(m.ident.to_string());
                    self.facts.inline_modules.push(self.scope.clone());
                    for item in items {
                        self.visit_item(item);
                    }
                    self.scope.pop();
                }
            }
            syn::Item::Use(u) => {
                let public = !matches!(u.vis, syn::Visibility::Inherited);
                self.use_tree(&mut Vec::new(), &u.tree, public);
            }
            _ => syn::visit::visit_item(self, item),
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_stmt(&mut self, stmt: &'ast syn::Stmt) {
        if let syn::Stmt::Item(item) = stmt {
            return self.visit_item(item);
        }
        syn::visit::visit_stmt(self, stmt);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 && matches!(segments[0].as_str(), "crate" | "super" | "self") {
            let line = path.segments[0].ident.span().start().line;
            self.facts.references.push(Reference {
                path: segments,
                line,
                scope: self.scope.clone(),
            });
        }
        syn::visit::visit_path(self, path);
    }
}

/// `path` (starting with `crate`, `super` or `self`), written in module `scope`, as a
/// path from the crate root.
fn absolute(scope: &[String], path: &[String]) -> Vec<String> {
    let mut base = scope.to_vec();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &path[1..];
        }
        _ => {
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
    }
    base.extend(rest.iter().cloned());
    base
}

/// The crate, read: which file defines each module, and what every name re-exports.
struct CrateMap {
    module_files: HashMap<Vec<String>, String>,
    reexports: HashMap<(Vec<String>, String), Vec<String>>,
}

impl CrateMap {
    /// `path`, written in module `scope`, from the crate root; `None` for a path into
    /// another crate. A `use` path may start with a child module's name.
    fn absolute(&self, scope: &[String], path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        if matches!(first.as_str(), "crate" | "super" | "self") {
            return Some(absolute(scope, path));
        }
        let mut child = scope.to_vec();
        child.push(first.clone());
        self.module_files.contains_key(&child).then(|| {
            child.extend_from_slice(&path[1..]);
            child
        })
    }

    /// The file that defines what `path` names, seen through re-exports.
    fn defining_file(&self, path: &[String]) -> Option<&str> {
        let mut path = path.to_vec();
        // Follow re-exports: the longest prefix that is one is replaced by its target.
        'follow: for _ in 0..32 {
            for len in (1..=path.len()).rev() {
                let key = (path[..len - 1].to_vec(), path[len - 1].clone());
                if let Some(target) = self.reexports.get(&key) {
                    if target[..] != path[..len] {
                        let mut next = target.clone();
                        next.extend_from_slice(&path[len..]);
                        path = next;
                        continue 'follow;
                    }
                }
            }
            break;
        }
        (0..=path.len())
            .rev()
            .find_map(|len| self.module_files.get(&path[..len]).map(String::as_str))
    }
}

/// A file's layer: its top-level folder (or, for `testing.rs` beside `testing/`, its
/// stem), or the crate root for the other files at the top of `src/`.
fn layer_of(rel: &str, folders: &BTreeSet<String>) -> String {
    match rel.split_once('/') {
        Some((folder, _)) => folder.to_owned(),
        None => {
            let stem = rel.trim_end_matches(".rs");
            if folders.contains(stem) {
                stem.to_owned()
            } else {
                ROOT.to_owned()
            }
        }
    }
}

/// Each layer's "May use:" line: the backquoted layer names, and "the crate root".
fn may_use_lines(files: &[SourceFile]) -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
    let folders: BTreeSet<String> = files
        .iter()
        .filter_map(|f| f.rel.split_once('/').map(|(folder, _)| folder.to_owned()))
        .collect();
    let mut rules = BTreeMap::new();
    let mut problems = Vec::new();
    rules.insert(ROOT.to_owned(), BTreeSet::new());
    for folder in &folders {
        let heads = [format!("{folder}/mod.rs"), format!("{folder}.rs")];
        let head = heads
            .iter()
            .find(|h| src_dir().join(h).exists())
            .expect("a folder has a mod.rs or a file beside it");
        let text = std::fs::read_to_string(src_dir().join(head)).unwrap();
        let line = text.lines().find_map(|l| {
            l.trim_start()
                .trim_start_matches("//!")
                .trim_start_matches("//")
                .trim_start()
                .strip_prefix("May use:")
                .map(str::to_owned)
        });
        let Some(line) = line else {
            problems.push(format!(
                "wsched/src/{head}: no \"May use:\" line saying which layers `{folder}/` may use"
            ));
            continue;
        };
        let mut allowed: BTreeSet<String> = line
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        if line.contains(ROOT) {
            allowed.insert(ROOT.to_owned());
        }
        for name in &allowed {
            if name != ROOT && !folders.contains(name) {
                problems.push(format!(
                    "wsched/src/{head}: \"May use:\" names `{name}`, which is not a layer folder"
                ));
            }
        }
        rules.insert(folder.clone(), allowed);
    }
    (rules, problems)
}

/// A circle in the "may use" relation, as `a → b → a`, if there is one.
fn find_circle(rules: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    fn visit(
        node: &str,
        rules: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<String> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut circle = stack[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle.join(" → "));
        }
        if !done.insert(node.to_owned()) {
            return None;
        }
        stack.push(node.to_owned());
        for next in rules.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, rules, stack, done) {
                return Some(circle);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    rules
        .keys()
        .find_map(|layer| visit(layer, rules, &mut Vec::new(), &mut done))
}

/// Every path in the crate's non-test code that reaches a layer its file's layer may
/// not use, as `file:line: what`.
fn violations() -> Vec<String> {
    let files = read_crate();
    let (rules, mut problems) = may_use_lines(&files);
    if let Some(circle) = find_circle(&rules) {
        problems.push(format!("the \"May use:\" lines form a circle: {circle}"));
    }
    let folders: BTreeSet<String> = rules.keys().filter(|l| *l != ROOT).cloned().collect();

    let mut map = CrateMap {
        module_files: HashMap::new(),
        reexports: HashMap::new(),
    };
    let mut facts = Vec::new();
    for file in &files {
        let mut file_facts = FileFacts::default();
        let mut collector = Collector {
            facts: &mut file_facts,
            scope: file.module.clone(),
        };
        for item in &file.syntax.items {
            collector.visit_item(item);
        }
        map.module_files
            .insert(file.module.clone(), file.rel.clone());
        for inline in &file_facts.inline_modules {
            map.module_files.insert(inline.clone(), file.rel.clone());
        }
        facts.push(file_facts);
    }
    for facts in &mut facts {
        for ((scope, name), path) in facts.reexports.drain(..) {
            if let Some(target) = map.absolute(&scope, &path) {
                map.reexports.insert((scope, name), target);
            }
        }
    }

    for (file, facts) in files.iter().zip(&facts) {
        if FACADES.contains(&file.rel.as_str()) {
            continue;
        }
        let from = layer_of(&file.rel, &folders);
        let allowed = &rules[&from];
        let mut seen = BTreeSet::new();
        for reference in &facts.references {
            let Some(target) = map.absolute(&reference.scope, &reference.path) else {
                continue;
            };
            let Some(to_file) = map.defining_file(&target) else {
                continue;
            };
            if FACADES.contains(&to_file) {
                continue;
            }
            let to = layer_of(to_file, &folders);
            if to == from || allowed.contains(&to) {
                continue;
            }
            if seen.insert((reference.line, to_file.to_owned())) {
                problems.push(format!(
                    "wsched/src/{}:{}: `{}` reaches {to_file} in `{to}`, which `{from}` may not use",
                    file.rel,
                    reference.line,
                    reference.path.join("::"),
                ));
            }
        }
    }
    problems
}

#[test]
fn every_import_goes_down_a_layer() {
    let problems = violations();
    let mut report = String::new();
    for problem in &problems {
        writeln!(report, "{problem}").unwrap();
    }
    assert!(
        problems.is_empty(),
        "{} imports go up a layer (see each folder's \"May use:\" line; a lower layer \
         reaches an upper one only through its hooks):\n{report}",
        problems.len()
    );
}

#[test]
fn each_layer_folder_lists_its_files() {
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(src_dir()).unwrap() {
        let folder = entry.unwrap().path();
        let head = folder.join("mod.rs");
        if !folder.is_dir() || !head.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&head).unwrap();
        for file in std::fs::read_dir(&folder).unwrap() {
            let path = file.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let listed = if path.is_dir() {
                format!("`{name}/`")
            } else {
                format!("`{name}`")
            };
            if name != "mod.rs" && !text.contains(&listed) {
                missing.push(format!("{}: no row for {listed}", head.display()));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn a_circle_in_the_may_use_lines_is_found() {
    let rules = |pairs: &[(&str, &[&str])]| -> BTreeMap<String, BTreeSet<String>> {
        pairs
            .iter()
            .map(|(layer, uses)| {
                let uses = uses.iter().map(|u| u.to_string()).collect();
                (layer.to_string(), uses)
            })
            .collect()
    };
    assert_eq!(
        find_circle(&rules(&[("a", &["b"]), ("b", &["c"]), ("c", &[])])),
        None
    );
    let circle = find_circle(&rules(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"])]));
    assert_eq!(circle.as_deref(), Some("a → b → c → a"));
}

#[test]
fn paths_resolve_from_the_module_they_are_written_in() {
    let scope = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        absolute(&scope("engine::cell"), &scope("super::worker::run")),
        scope("engine::worker::run")
    );
    assert_eq!(
        absolute(&scope("engine::cell"), &scope("crate::pid::Pid")),
        scope("pid::Pid")
    );
    assert_eq!(
        absolute(&scope("engine"), &scope("self::queue")),
        scope("engine::queue")
    );
}
