//! The documents that show the quick starts (README.md and docs/quickstarts.md) and the files
//! they show cannot drift apart: every ```rust block right after a `<!-- file: PATH -->` marker
//! must equal that file byte for byte, every marked file must exist, and every
//! `examples/quickstart_*.rs` must be shown in one of the documents. The quick starts'
//! `[dependencies]` blocks name the lameduck crates by path in a clone next to the user's
//! project (`../lameduck/crates/NAME`); those crates must exist.

use std::fs;
use std::path::PathBuf;

const MARKER_START: &str = "<!-- file: ";
const MARKER_END: &str = " -->";
/// Where the quick starts' `[dependencies]` blocks expect a clone of this repository.
const CLONE_PREFIX: &str = "../lameduck/";
/// The documents that show quick starts, relative to the repository root.
const DOCUMENTS: [&str; 2] = ["README.md", "docs/quickstarts.md"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Each document of [`DOCUMENTS`] with its text.
fn documents() -> Vec<(&'static str, String)> {
    DOCUMENTS
        .iter()
        .map(|&doc| {
            let text = fs::read_to_string(root().join(doc))
                .unwrap_or_else(|e| panic!("{doc} is not readable: {e}"));
            (doc, text)
        })
        .collect()
}

/// A fenced block: its info string (`rust`, `toml`, ...) and its content, each line ending
/// in `\n`.
struct Block {
    info: String,
    content: String,
    /// The 1-based line of the opening fence in its document.
    line: usize,
}

/// Every fenced block of `text` (the document `doc`, named in failures), with the marked path
/// of the blocks that follow a `<!-- file: PATH -->` line (blank lines between the marker and
/// the fence allowed).
fn blocks(doc: &str, text: &str) -> Vec<(Option<String>, Block)> {
    let mut out = Vec::new();
    let mut marker: Option<String> = None;
    let mut lines = text.split_inclusive('\n').enumerate();
    while let Some((i, line)) = lines.next() {
        let trimmed = line.trim_end();
        if let Some(rest) = trimmed.strip_prefix(MARKER_START) {
            let path = rest
                .strip_suffix(MARKER_END)
                .unwrap_or_else(|| panic!("{doc}:{}: unterminated file marker", i + 1));
            assert!(
                marker.is_none(),
                "{doc}:{}: a file marker not followed by a code block",
                i + 1
            );
            marker = Some(path.trim().to_string());
        } else if let Some(info) = trimmed.strip_prefix("```") {
            let mut content = String::new();
            let mut closed = false;
            for (_, inner) in lines.by_ref() {
                if inner.trim_end() == "```" {
                    closed = true;
                    break;
                }
                content.push_str(inner);
            }
            assert!(closed, "{doc}:{}: unterminated code block", i + 1);
            let block = Block {
                info: info.trim().to_string(),
                content,
                line: i + 1,
            };
            out.push((marker.take(), block));
        } else if !trimmed.is_empty() {
            assert!(
                marker.is_none(),
                "{doc}:{}: a file marker must be followed by its code block",
                i + 1
            );
        }
    }
    assert!(marker.is_none(), "{doc}: a file marker at the end");
    out
}

#[test]
fn marked_blocks_equal_their_files() {
    let mut marked = Vec::new();
    for (doc, text) in documents() {
        let before = marked.len();
        for (path, block) in blocks(doc, &text) {
            let Some(path) = path else { continue };
            assert_eq!(
                block.info, "rust",
                "{doc}:{}: the block shown for {path} must be a ```rust block",
                block.line
            );
            let file = root().join(&path);
            assert!(
                file.is_file(),
                "{doc}:{}: marked file {path} does not exist",
                block.line
            );
            let on_disk = fs::read_to_string(&file).expect("marked file is readable");
            assert!(
                on_disk == block.content,
                "{doc}:{}: the block differs from {path}; copy the file into {doc} (or \
                 {doc} into the file) so they are equal byte for byte",
                block.line
            );
            marked.push(path);
        }
        assert!(marked.len() > before, "{doc} has no file markers");
    }

    // Every quick start in examples/ is shown in one of the documents.
    for entry in fs::read_dir(root().join("examples")).expect("examples/ is readable") {
        let name = entry.expect("examples/ entry").file_name();
        let name = name.to_string_lossy();
        if name.starts_with("quickstart_") && name.ends_with(".rs") {
            let path = format!("examples/{name}");
            assert!(
                marked.contains(&path),
                "{path} is not shown in {} (add `{MARKER_START}{path}{MARKER_END}` before a \
                 ```rust block with its content to one of them)",
                DOCUMENTS.join(" or ")
            );
        }
    }
}

#[test]
fn dependency_paths_name_crates_of_this_repository() {
    for (doc, text) in documents() {
        let mut seen = 0;
        for (_, block) in blocks(doc, &text) {
            if block.info != "toml" {
                continue;
            }
            for line in block.content.lines() {
                let Some(start) = line.find("path = \"") else {
                    continue;
                };
                let rest = &line[start + "path = \"".len()..];
                let path = &rest[..rest.find('"').expect("closing quote")];
                let inside = path.strip_prefix(CLONE_PREFIX).unwrap_or_else(|| {
                    panic!(
                        "{doc}:{}: path dependency {path} should start with {CLONE_PREFIX}",
                        block.line
                    )
                });
                assert!(
                    root().join(inside).join("Cargo.toml").is_file(),
                    "{doc}:{}: {path} is not a crate of this repository",
                    block.line
                );
                seen += 1;
            }
        }
        assert!(seen > 0, "{doc} shows no path dependencies");
    }
}
