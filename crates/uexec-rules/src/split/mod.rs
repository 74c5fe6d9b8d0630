//! A script split into the simple commands its shell would run, with tree-sitter's bash
//! grammar (the parser Codex splits scripts with), never by its text.
//!
//! Why a tree and not a tokenizer: a command runs wherever the grammar puts one, not only
//! between `;` and `&&`. So:
//! 1. the script is parsed whole; every `command` node anywhere in the tree is a part: after
//!    `;`, `&&`, `||` and `&`, in pipes, subshells, `{ }`, `if`/`while`/`for`/`case` bodies,
//!    function bodies, and inside `$(…)`, backticks and `<(…)` wherever they stand (an
//!    argument, an assignment, a here-doc's body);
//! 2. each command's words are read as the shell passes them: quotes removed, escapes
//!    undone; a word whose value the shell computes (`$x`, `$(…)`, a glob, `~`, `{a,b}`) is
//!    kept as [`Word::Expanded`], which no `allow` rule matches and any stricter rule does;
//! 3. the command is resolved ([`crate::wrappers`]): leading `VAR=x` dropped, wrappers
//!    (`timeout 5`, `env A=1`, `sudo`, …) looked through, `bash -c STRING` parsed again
//!    (at most [`MAX_DEPTH`] deep), `eval` and a shell fed its script on stdin made opaque;
//! 4. a script the grammar cannot read whole (an `ERROR` node) keeps the commands it could
//!    read and adds one opaque part for the whole text.

use std::cell::RefCell;
use std::sync::OnceLock;

use tree_sitter::{Language, Node, Parser, Tree};

mod specs;
mod wrappers;

pub(crate) use wrappers::{basename, posix_like};

/// How deep `bash -c "sh -c '…'"` is followed; deeper is opaque.
pub(crate) const MAX_DEPTH: usize = 8;

/// One word of a command as the shell passes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Word {
    /// Its value is its text (quotes removed, escapes undone).
    Literal(String),
    /// The shell computes its value (its source text kept): it may become any word.
    Expanded(String),
}

impl Word {
    pub(crate) fn text(&self) -> &str {
        match self {
            Word::Literal(s) | Word::Expanded(s) => s,
        }
    }

    pub(crate) fn into_text(self) -> String {
        match self {
            Word::Literal(s) | Word::Expanded(s) => s,
        }
    }

    pub(crate) fn literal(&self) -> Option<&str> {
        match self {
            Word::Literal(s) => Some(s),
            Word::Expanded(_) => None,
        }
    }
}

/// A simple command of the script, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command {
    /// The words of the program that runs, wrappers looked through.
    pub words: Vec<Word>,
    /// The wrappers looked through to reach it, outermost first, each from its own name on
    /// (`sudo -u x timeout 5 git push` gives `sudo …` and `timeout …`); only stricter rules
    /// judge them, so `allow env` admits no program behind `env`.
    pub wrappers: Vec<Vec<Word>>,
    /// It cannot be split for sure: no `allow` rule admits it.
    pub opaque: bool,
    /// Its source text (an opaque part is shown by it).
    pub text: String,
}

/// What the commands found so far inherit: the wrappers around a `bash -c` string, and
/// whether the shell that runs them is one the bash grammar reads.
#[derive(Debug, Clone, Default)]
pub(crate) struct Context {
    pub wrappers: Vec<Vec<Word>>,
    pub opaque: bool,
    pub depth: usize,
}

/// The grammar's node kinds this module looks at, by id: `Node::kind` converts its name
/// from C on every call, a tenth of the walk.
struct Kinds {
    command: u16,
    declaration_command: u16,
    unset_command: u16,
    command_name: u16,
    word: u16,
    number: u16,
    raw_string: u16,
    string: u16,
    string_content: u16,
    concatenation: u16,
    comment: u16,
    redirected_statement: u16,
    heredoc_redirect: u16,
    heredoc_body: u16,
    herestring_redirect: u16,
    pipeline: u16,
    /// Kinds whose value the shell computes.
    computed: Vec<u16>,
}

fn kinds() -> &'static Kinds {
    static KINDS: OnceLock<Kinds> = OnceLock::new();
    KINDS.get_or_init(|| {
        let language: Language = tree_sitter_bash::LANGUAGE.into();
        let id = |kind: &str| language.id_for_node_kind(kind, true);
        Kinds {
            command: id("command"),
            declaration_command: id("declaration_command"),
            unset_command: id("unset_command"),
            command_name: id("command_name"),
            word: id("word"),
            number: id("number"),
            raw_string: id("raw_string"),
            string: id("string"),
            string_content: id("string_content"),
            concatenation: id("concatenation"),
            comment: id("comment"),
            redirected_statement: id("redirected_statement"),
            heredoc_redirect: id("heredoc_redirect"),
            heredoc_body: id("heredoc_body"),
            herestring_redirect: id("herestring_redirect"),
            pipeline: id("pipeline"),
            computed: COMPUTED.iter().map(|kind| id(kind)).collect(),
        }
    })
}

/// Node kinds whose value the shell computes.
const COMPUTED: &[&str] = &[
    "simple_expansion",
    "expansion",
    "command_substitution",
    "process_substitution",
    "arithmetic_expansion",
    "brace_expression",
    "translated_string",
    "ansi_c_string",
    "array",
    "subscript",
    "extglob_pattern",
];

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

fn parse(script: &str) -> Option<Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .ok()?;
            *slot = Some(parser);
        }
        slot.as_mut()?.parse(script, None)
    })
}

/// Every simple command of `script`, in source order, into `out`.
pub(crate) fn split(script: &str, ctx: &Context, out: &mut Vec<Command>) {
    let opaque_whole = |out: &mut Vec<Command>| {
        out.push(Command {
            words: Vec::new(),
            wrappers: ctx.wrappers.clone(),
            opaque: true,
            text: script.trim().to_owned(),
        })
    };
    if ctx.depth > MAX_DEPTH {
        return opaque_whole(out);
    }
    let Some(tree) = parse(script) else {
        return opaque_whole(out);
    };
    let root = tree.root_node();
    let before = out.len();
    walk(root, script.as_bytes(), ctx, out);
    if root.has_error() {
        out.insert(
            before,
            Command {
                words: Vec::new(),
                wrappers: ctx.wrappers.clone(),
                opaque: true,
                text: script.trim().to_owned(),
            },
        );
    }
}

/// The command a program run with exactly `words` is (an exec: no shell between, so every
/// word is literal), resolved as a parsed one is: wrappers looked through, `sh -c STRING`
/// parsed; nothing else is parsed.
pub(crate) fn exec(words: &[String], out: &mut Vec<Command>) {
    let text = uexec_core::policy::rules::shell_line(words);
    let words = words.iter().cloned().map(Word::Literal).collect();
    wrappers::resolve(words, text, &Context::default(), out);
}

/// The literal words of a one-command text (a Codex example string, a Claude Code
/// `Bash(…)` entry), not resolved; `None` if it is not exactly one command of literal words.
pub(crate) fn literal_words(text: &str) -> Option<Vec<String>> {
    let tree = parse(text)?;
    let root = tree.root_node();
    if root.has_error() || root.named_child_count() != 1 {
        return None;
    }
    let command = root.named_child(0)?;
    if command.kind_id() != kinds().command {
        return None;
    }
    let (words, _) = command_words(command, text.as_bytes())?;
    words
        .into_iter()
        .map(|w| w.literal().map(str::to_owned))
        .collect()
}

/// Visits every node once, depth first, with one cursor (a cursor per node costs an
/// allocation each, more than the visit).
fn walk(root: Node<'_>, src: &[u8], ctx: &Context, out: &mut Vec<Command>) {
    let k = kinds();
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        let kind = node.kind_id();
        // A command whose words are all plain has nothing inside to run: not descended.
        let mut descend = true;
        if kind == k.command {
            match command_words(node, src) {
                Some((words, plain)) => {
                    descend = !plain;
                    wrappers::resolve(words, text_of(node, src), ctx, out);
                    if !plain {
                        fed_to_a_shell(node, src, ctx, out);
                    }
                }
                None => out.push(Command {
                    words: Vec::new(),
                    wrappers: ctx.wrappers.clone(),
                    opaque: true,
                    text: text_of(node, src),
                }),
            }
        } else if kind == k.redirected_statement {
            fed_to_a_shell(node, src, ctx, out);
        } else if kind == k.pipeline {
            piped_to_a_shell(node, src, ctx, out);
        } else if kind == k.declaration_command || kind == k.unset_command {
            let mut words_cursor = node.walk();
            let words = node
                .children(&mut words_cursor)
                .filter(|c| c.kind_id() != k.comment)
                .map(|c| word_of(c, src))
                .collect();
            wrappers::resolve(words, text_of(node, src), ctx, out);
        }
        // Substitutions inside a command's words run too: its children are visited.
        if descend && node.child_count() > 0 && cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return;
            }
        }
    }
}

/// `bash <<EOF … EOF`, `sh <<< 'git push'`: the shell's part is opaque (it reads its
/// script from stdin, `crate::wrappers`); the here-doc's or here-string's text is split as
/// a script as well, so a stricter rule on what it runs holds.
fn fed_to_a_shell(node: Node<'_>, src: &[u8], ctx: &Context, out: &mut Vec<Command>) {
    let k = kinds();
    // The redirections are the statement's (`bash <<EOF`, `{ sh; } <<< s`), or the
    // command's own (`sh <<< 'git push'`).
    let body = if node.kind_id() == k.command {
        node
    } else {
        match node.child_by_field_name("body") {
            Some(body) if body.kind_id() == k.command => body,
            _ => return,
        }
    };
    let shell = command_words(body, src).is_some_and(|(words, _)| {
        words
            .iter()
            .filter_map(Word::literal)
            .any(wrappers::posix_like)
    });
    if !shell {
        return;
    }
    let nested = Context {
        wrappers: ctx.wrappers.clone(),
        opaque: ctx.opaque,
        depth: ctx.depth + 1,
    };
    let mut cursor = node.walk();
    for redirect in node.children(&mut cursor) {
        let kind = redirect.kind_id();
        let script = if kind == k.heredoc_redirect {
            let mut inner = redirect.walk();
            let body = redirect
                .children(&mut inner)
                .find(|c| c.kind_id() == k.heredoc_body);
            body.map(|b| text_of(b, src))
        } else if kind == k.herestring_redirect {
            redirect.named_child(0).map(|w| word_of(w, src).into_text())
        } else {
            None
        };
        if let Some(script) = script {
            split(&script, &nested, out);
        }
    }
}

fn is_shell(command: Node<'_>, src: &[u8]) -> bool {
    command.kind_id() == kinds().command
        && command_words(command, src).is_some_and(|(words, _)| {
            words
                .iter()
                .filter_map(Word::literal)
                .any(wrappers::posix_like)
        })
}

/// `echo 'git push' | bash`, `printf '%s\n' 'git push' | sh`: what a literal `echo` or
/// `printf` pipes into a shell is split as a script as well (the shell's part is opaque).
fn piped_to_a_shell(node: Node<'_>, src: &[u8], ctx: &Context, out: &mut Vec<Command>) {
    let mut cursor = node.walk();
    let stages: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
    for pair in stages.windows(2) {
        if !is_shell(pair[1], src) || pair[0].kind_id() != kinds().command {
            continue;
        }
        let Some((words, _)) = command_words(pair[0], src) else {
            continue;
        };
        let Some(words) = words
            .iter()
            .map(Word::literal)
            .collect::<Option<Vec<&str>>>()
        else {
            continue;
        };
        let text = match words.split_first() {
            Some((&"echo", rest)) => rest
                .iter()
                .skip_while(|w| matches!(**w, "-n" | "-e" | "-E" | "-ne" | "-en"))
                .copied()
                .collect::<Vec<_>>()
                .join(" "),
            // Each argument after the format is a line, near enough for `%s\n`.
            Some((&"printf", [_format, rest @ ..])) => rest.join("\n"),
            _ => continue,
        };
        let nested = Context {
            wrappers: ctx.wrappers.clone(),
            opaque: ctx.opaque,
            depth: ctx.depth + 1,
        };
        split(&text, &nested, out);
    }
}

/// The command's name and arguments, its assignments and redirections left out, and
/// whether every child of it is a plain leaf (nothing inside runs); `None` when it has no
/// name node.
fn command_words(node: Node<'_>, src: &[u8]) -> Option<(Vec<Word>, bool)> {
    let k = kinds();
    let count = node.child_count();
    let mut words = Vec::with_capacity(count);
    let mut named = false;
    let mut plain = true;
    // By index, not with a cursor: a cursor's step to a sibling costs ~700 instructions in
    // this grammar's trees, an indexed child of a short command far less.
    for at in 0..count {
        let Some(child) = node.child(at) else {
            break;
        };
        let field = node.field_name_for_child(at as u32);
        match field {
            Some("name") | Some("argument") => {
                named |= field == Some("name");
                let word = word_of(child, src);
                let kind = child.kind_id();
                let leaf = kind == k.word
                    || kind == k.number
                    || kind == k.raw_string
                    || (kind == k.command_name
                        && child.child(0).is_some_and(|c| c.kind_id() == k.word));
                plain &= leaf || child.child_count() == 0;
                words.push(word);
            }
            _ => plain &= child.child_count() == 0,
        }
    }
    named.then_some((words, plain))
}

pub(crate) fn text_of(node: Node<'_>, src: &[u8]) -> String {
    slice_of(node, src).into_owned()
}

/// The node's source text, borrowed when it is UTF-8 (the script is a `&str`, and a node
/// starts and ends on character boundaries).
fn slice_of<'s>(node: Node<'_>, src: &'s [u8]) -> std::borrow::Cow<'s, str> {
    String::from_utf8_lossy(&src[node.byte_range()])
}

fn computed(kind: u16) -> bool {
    kinds().computed.contains(&kind)
}

fn word_of(node: Node<'_>, src: &[u8]) -> Word {
    let k = kinds();
    let kind = node.kind_id();
    if kind == k.command_name {
        return match node.named_child(0) {
            Some(inner) => word_of(inner, src),
            None => Word::Literal(text_of(node, src)),
        };
    }
    let text = slice_of(node, src);
    if kind == k.word || kind == k.number {
        if glob_like(&text) {
            Word::Expanded(text.into_owned())
        } else if text.contains('\\') {
            Word::Literal(unescape_bare(&text))
        } else {
            Word::Literal(text.into_owned())
        }
    } else if kind == k.raw_string {
        Word::Literal(strip_quotes(&text, '\'').to_owned())
    } else if kind == k.string {
        let mut cursor = node.walk();
        let computed_inside = node
            .named_children(&mut cursor)
            .any(|c| c.kind_id() != k.string_content);
        if computed_inside {
            Word::Expanded(text.into_owned())
        } else {
            Word::Literal(unescape_double(strip_quotes(&text, '"')))
        }
    } else if kind == k.concatenation {
        let mut value = String::new();
        let mut cursor = node.walk();
        for part in node.children(&mut cursor) {
            match word_of(part, src) {
                Word::Literal(s) => value.push_str(&s),
                Word::Expanded(_) => return Word::Expanded(text.into_owned()),
            }
        }
        Word::Literal(value)
    } else if computed(kind) || has_computed(node) {
        Word::Expanded(text.into_owned())
    } else {
        Word::Literal(text.into_owned())
    }
}

fn has_computed(node: Node<'_>) -> bool {
    let mut cursor = node.walk();
    let found = node
        .named_children(&mut cursor)
        .any(|c| computed(c.kind_id()) || has_computed(c));
    found
}

fn strip_quotes(text: &str, quote: char) -> &str {
    let inner = text.strip_prefix(quote).unwrap_or(text);
    inner.strip_suffix(quote).unwrap_or(inner)
}

/// An unquoted word the shell may expand to other words: a glob (`*`, `?`, `[`), a leading
/// `~`, a brace list (`{a,b}`, `{1..3}`).
fn glob_like(raw: &str) -> bool {
    if raw.starts_with('~') {
        return true;
    }
    let mut escaped = false;
    let mut brace = false;
    for (at, c) in raw.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '*' | '?' => return true,
            // A bracket expression needs its `]`: `[` alone is the test command.
            '[' if raw[at + 1..].contains(']') => return true,
            '{' => brace = true,
            ',' if brace => return true,
            _ => {}
        }
    }
    brace && raw.contains("..")
}

/// An unquoted word's value: a backslash quotes the next character; backslash-newline is
/// nothing.
fn unescape_bare(raw: &str) -> String {
    let mut value = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(next) => value.push(next),
            }
        } else {
            value.push(c);
        }
    }
    value
}

/// Inside double quotes a backslash quotes only `$`, `` ` ``, `"`, `\` and a newline.
fn unescape_double(raw: &str) -> String {
    let mut value = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => {
                    value.extend(chars.next());
                }
                Some('\n') => {
                    chars.next();
                }
                _ => value.push(c),
            }
        } else {
            value.push(c);
        }
    }
    value
}

#[cfg(test)]
mod tests;
