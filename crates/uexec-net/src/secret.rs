//! Tokens read from files (`--token-file` and friends): unlike argv (`ps`) or the
//! environment, a file readable by its owner alone leaks to no one.

use std::path::{Path, PathBuf};

/// Why a token file cannot be used; names the flag it was given to.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("{flag} {}: cannot read the token file: {source}", path.display())]
    Unreadable {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{flag} {}: the token file is empty", path.display())]
    Empty { flag: &'static str, path: PathBuf },
    #[error("{flag} {}: the token must be one line of UTF-8", path.display())]
    NotOneLine { flag: &'static str, path: PathBuf },
}

/// The token in `path`: its content without the trailing newline (`\n` or `\r\n`).
pub fn read_token_file(flag: &'static str, path: &Path) -> Result<String, TokenFileError> {
    let bytes = std::fs::read(path).map_err(|source| TokenFileError::Unreadable {
        flag,
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|_| TokenFileError::NotOneLine {
        flag,
        path: path.to_path_buf(),
    })?;
    let token = text.strip_suffix('\n').unwrap_or(&text);
    let token = token.strip_suffix('\r').unwrap_or(token);
    if token.is_empty() {
        return Err(TokenFileError::Empty {
            flag,
            path: path.to_path_buf(),
        });
    }
    if token.contains(['\n', '\r']) {
        return Err(TokenFileError::NotOneLine {
            flag,
            path: path.to_path_buf(),
        });
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_the_trailing_newline_and_names_the_flag_on_errors() {
        let dir = std::env::temp_dir().join(format!("uexec-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("t");
        std::fs::write(&file, "s3cret\r\n").unwrap();
        assert_eq!(read_token_file("--token-file", &file).unwrap(), "s3cret");
        std::fs::write(&file, "\n").unwrap();
        let empty = read_token_file("--token-file", &file).unwrap_err();
        assert!(empty.to_string().starts_with("--token-file "), "{empty}");
        std::fs::write(&file, "a\nb\n").unwrap();
        assert!(matches!(
            read_token_file("--token-file", &file),
            Err(TokenFileError::NotOneLine { .. })
        ));
        let missing = read_token_file("--remote-token-file", &dir.join("nope")).unwrap_err();
        assert!(
            missing.to_string().contains("--remote-token-file"),
            "{missing}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
