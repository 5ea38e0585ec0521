//! `WWW-Authenticate` challenges as registries send them (RFC 7235): Basic, or Bearer naming the
//! token service (`realm`), its `service` and the `scope` the token must cover.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer { realm: String, service: Option<String>, scope: Option<String> },
}

/// The challenge in a `WWW-Authenticate` value; None for a scheme registries do not use.
pub fn parse(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut params = parameters(rest);
    Some(Challenge::Bearer {
        realm: params.remove("realm")?,
        service: params.remove("service"),
        scope: params.remove("scope"),
    })
}

/// `key="value", key=value` pairs; a quoted value may hold commas and backslash escapes.
fn parameters(text: &str) -> BTreeMap<String, String> {
    let mut params = BTreeMap::new();
    let mut rest = text.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, remaining) = match after.strip_prefix('"') {
            Some(quoted) => {
                let mut value = String::new();
                let mut end = quoted.len();
                let mut chars = quoted.char_indices();
                while let Some((index, c)) = chars.next() {
                    match c {
                        '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
                        '"' => {
                            end = index + 1;
                            break;
                        }
                        c => value.push(c),
                    }
                }
                (value, &quoted[end..])
            }
            None => {
                let end = after.find(',').unwrap_or(after.len());
                (after[..end].trim().to_string(), &after[end..])
            }
        };
        params.insert(key, value);
        rest = remaining.trim_start().trim_start_matches(',').trim_start();
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_hubs_bearer_challenge() {
        let header = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:kyuz0/vllm-therock-gfx1151:pull""#;
        assert_eq!(
            parse(header),
            Some(Challenge::Bearer {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into()),
                scope: Some("repository:kyuz0/vllm-therock-gfx1151:pull".into()),
            })
        );
    }

    #[test]
    fn quoted_commas_unquoted_values_and_other_schemes() {
        let header = r#"bearer realm=https://r.example/token, scope="repository:a:pull,push", error="x\"y""#;
        assert_eq!(
            parse(header),
            Some(Challenge::Bearer {
                realm: "https://r.example/token".into(),
                service: None,
                scope: Some("repository:a:pull,push".into()),
            })
        );
        assert_eq!(parse(r#"Basic realm="test""#), Some(Challenge::Basic));
        assert_eq!(parse("Negotiate abc"), None);
        assert_eq!(parse(r#"Bearer service="no realm""#), None);
    }
}
