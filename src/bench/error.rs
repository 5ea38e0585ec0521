//! How the bench's failures become the crate's errors, in one place: an endpoint that fails names
//! the URL, the request and the server's answer; a store file that cannot be used names its path.

use std::path::Path;

use crate::error::Error;

/// The most of a server's answer an error quotes.
const ANSWER_EXCERPT: usize = 400;

/// `POST URL` (what was asked) failed: `answer` is what came back, or why nothing did.
pub fn endpoint(method_url: &str, request: &str, answer: &str, fix: &str) -> Error {
    Error::Command {
        program: method_url.to_string(),
        message: format!("{request}: {}", excerpt(answer)),
        fix: Some(fix.to_string()),
    }
}

/// A server's answer cut to a readable length, on one line.
pub fn excerpt(answer: &str) -> String {
    let flat: String = answer.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= ANSWER_EXCERPT {
        return flat;
    }
    let cut: String = flat.chars().take(ANSWER_EXCERPT).collect();
    format!("{cut}…")
}

/// A file of the bench's store that is not what it should be.
pub fn store_file(path: &Path, why: &str) -> Error {
    Error::host(
        path.display().to_string(),
        format!("{} cannot be used: {why}", path.display()),
        format!("move it aside (`mv {0} {0}.bad`) and run again", path.display()),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_answers_are_cut_and_flattened() {
        let answer = format!("line one\n  line two {}", "x".repeat(1000));
        let cut = super::excerpt(&answer);
        assert!(cut.starts_with("line one line two x"));
        assert!(cut.chars().count() <= super::ANSWER_EXCERPT + 1);
        let error = super::endpoint(
            "POST http://127.0.0.1:8080/v1/completions",
            "a prompt of 3 token ids",
            "HTTP 401",
            "pass --api-key-file",
        );
        let text = error.to_string();
        assert!(text.contains("POST http://127.0.0.1:8080/v1/completions"), "{text}");
        assert!(text.contains("HTTP 401") && text.contains("--api-key-file"), "{text}");
    }
}
