//! The README's own promises, held to what they point at: the tools `uexec mcp` offers, the
//! test command CI runs, the figures on the book's pages with their commands, the recipes
//! the agents harness runs, the steps of the people's walk, the crates of the design. The
//! book's pages keep their tests beside each sentence (the `tests/...` they name); its links
//! are checked by `docs/check_links.py` in CI.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::helpers::{stdio_client, UEXEC};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The README's section under `## heading`, up to the next `## `.
fn section(heading: &str) -> String {
    let readme = read("README.md");
    let start = readme
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("no section {heading:?} in the README"));
    let body = &readme[start + heading.len() + 5..];
    body[..body.find("\n## ").unwrap_or(body.len())].to_owned()
}

/// The lines of the first fenced block (```LANG) of `text`.
fn block(text: &str, lang: &str) -> Vec<String> {
    let open = format!("```{lang}\n");
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("no {open:?} block"))
        + open.len();
    let body = &text[start..];
    body[..body.find("```").unwrap()]
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The words between backticks in `text`.
fn quoted(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_readme_names_the_tools_uexec_mcp_offers_and_so_does_help() {
    let plug = section("Plug it into Claude Code and Codex");
    let start = plug.find("The six tools: ").expect("the tools' sentence");
    let sentence = &plug[start..start + plug[start..].find(". ").unwrap()];
    let named: BTreeSet<String> = quoted(sentence).into_iter().collect();
    assert_eq!(named.len(), 6, "{sentence}");

    let (client, _, _) = stdio_client(&[]).await;
    let offered: BTreeSet<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    client.cancel().await.unwrap();
    assert_eq!(named, offered, "the README against tools/list");

    // The book's table lists the same ones.
    let tools = read("docs/src/tools.md");
    let table: BTreeSet<String> = tools
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| l[..l.find('`').unwrap()].to_owned())
        .collect();
    assert_eq!(table, offered, "docs/src/tools.md against tools/list");

    // And `uexec --help`, on the line of `mcp`.
    let out = std::process::Command::new(UEXEC)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("mcp "))
        .unwrap_or_else(|| panic!("no mcp line in\n{help}"));
    for tool in &offered {
        assert!(line.contains(tool.as_str()), "{tool} not in {line:?}");
    }
}

#[test]
fn the_readmes_test_command_is_the_one_ci_runs() {
    let lines = block(&section("Build, run, test"), "sh");
    let test = lines
        .iter()
        .find(|l| l.starts_with("cargo test"))
        .expect("a test command");
    let test = test[..test.find('#').unwrap_or(test.len())].trim();
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == test),
        "`{test}` is not a line of .ci/run"
    );
}

#[test]
fn every_figure_of_the_readme_is_on_its_page_beside_its_command() {
    let figures = section("Figures");
    let rows: Vec<&str> = figures
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| what"))
        .collect();
    assert!(rows.len() >= 5, "{figures}");
    for row in rows {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        let [_, figure, command, page] = cells[..] else {
            panic!("{row}");
        };
        let link = &page[page.find("](").unwrap() + 2..page.len() - 1];
        let text = read(link);
        let command = command.trim_matches('`');
        assert!(text.contains(command), "`{command}` not in {link}");
        let numbers = figure
            .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
            .map(|n| n.trim_matches(|c| c == '.' || c == ','))
            .filter(|n| !n.is_empty());
        for number in numbers {
            assert!(
                text.contains(number),
                "{number} (of {figure:?}) not in {link}"
            );
        }
    }
}

/// The index of the benchmarks page: each command is on the page it links to.
#[test]
fn the_benchmarks_index_names_commands_that_are_on_their_pages() {
    let index = read("docs/src/benchmarks.md");
    let table = &index[index.find("## Figures on other pages").expect("the index")..];
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| figures"))
        .collect();
    assert!(rows.len() >= 5, "{table}");
    for row in rows {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        let [_, command, page] = cells[..] else {
            panic!("{row}");
        };
        let link = &page[page.find("](").unwrap() + 2..page.len() - 1];
        let text = read(&format!("docs/src/{link}"));
        let command = command.trim_matches('`');
        assert!(text.contains(command), "`{command}` not in docs/src/{link}");
    }
}

#[test]
fn the_readmes_recipes_are_the_books_and_the_harness_runs_them() {
    let plug = section("Plug it into Claude Code and Codex");
    let mcp = read("docs/src/mcp.md");
    for lang in ["sh", "toml"] {
        let recipe = block(&plug, lang).join("\n");
        assert!(mcp.contains(&recipe), "{recipe} not in docs/src/mcp.md");
    }
    // The harness starts Claude Code as the README says, in its `own_shell_off` scenario.
    assert!(plug.contains("--disallowedTools Bash"));
    let scenarios = read("crates/uexec-mcp/agents/scenarios.py");
    assert!(scenarios.contains("--disallowedTools"));
    assert!(scenarios.contains("own_shell_off"));
}

#[test]
fn the_readmes_commands_for_people_are_steps_of_the_walk() {
    let people = read("docs/src/people.md");
    let steps: Vec<String> = quoted(&people);
    for line in block(&section("For people"), "sh") {
        assert!(
            steps.iter().any(|s| s == &line),
            "`{line}` is no step of docs/src/people.md"
        );
    }
}

#[test]
fn the_readmes_design_names_every_crate() {
    let design = block(&section("Design in one screen"), "");
    let named: BTreeSet<String> = design
        .iter()
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| !l.starts_with(' '))
        .map(|l| l[..l.find('/').unwrap()].to_owned())
        .collect();
    let crates: BTreeSet<String> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(named, crates);
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let summary = read("docs/src/SUMMARY.md");
    let listed: BTreeSet<String> = summary
        .split("](")
        .skip(1)
        .map(|s| s[..s.find(')').unwrap()].to_owned())
        .collect();
    let pages: BTreeSet<String> = std::fs::read_dir(root().join("docs/src"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "SUMMARY.md")
        .collect();
    assert_eq!(listed, pages);
}

/// Every test the book names by its function (`a_second_ctrl_c_forces_the_end_...`) is a
/// function of the workspace: a renamed or removed test leaves no sentence citing nothing.
#[test]
fn every_test_the_book_names_is_a_function_of_the_workspace() {
    fn sources(dir: &Path, into: &mut String) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, into);
            } else if path.extension().is_some_and(|e| e == "rs") {
                into.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut code = String::new();
    sources(&root().join("crates"), &mut code);
    let mut named = 0;
    for page in std::fs::read_dir(root().join("docs/src")).unwrap() {
        let page = page.unwrap().path();
        let text = std::fs::read_to_string(&page).unwrap();
        for word in quoted(&text) {
            let test_like = word.matches('_').count() >= 4
                && !word.contains("__")
                && word
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if test_like {
                named += 1;
                assert!(
                    code.contains(&format!("fn {word}(")),
                    "{}: no fn {word} in crates/",
                    page.display()
                );
            }
        }
    }
    assert!(named >= 20, "{named}");
}
