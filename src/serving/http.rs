//! The probes that prove an engine serves: `GET /health` and `GET /v1/models`, asked on the head
//! node itself (the operator's machine may not be on the cluster link), with the endpoint's API
//! key as a bearer token where it has one, by the link's one GET ([`crate::link::http_get`]); what
//! came back as the answer a probe reports.

use std::net::SocketAddr;
use std::time::Duration;

use crate::link::http_get::{self, GetFailure, GetRequest};
use crate::link::io_failure::{IoFailure, IoStep};

/// The most of a body read: `/v1/models` is a few hundred bytes.
const BODY_LIMIT: usize = 1 << 20;

/// What a GET came back with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HttpAnswer {
    /// Nothing listens yet (vLLM binds its port only once the engine is up).
    Refused,
    /// No answer within the limit.
    TimedOut,
    /// An answer: status and body.
    Status(u16, String),
    /// The connection failed otherwise (no route to it, reset midway).
    Failed(IoFailure),
    /// What came back is no HTTP answer: its first characters.
    NotHttp(String),
    /// The node that was to ask could not be asked (its call failed): why.
    Unasked(String),
}

impl std::fmt::Display for HttpAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpAnswer::Refused => f.write_str("nothing listens"),
            HttpAnswer::TimedOut => f.write_str("no answer in time"),
            HttpAnswer::Status(code, _) => write!(f, "answered {code}"),
            HttpAnswer::Failed(failure) => write!(f, "{failure}"),
            HttpAnswer::NotHttp(head) => write!(f, "not an HTTP answer: {head:?}"),
            HttpAnswer::Unasked(why) => f.write_str(why),
        }
    }
}

pub async fn get(address: SocketAddr, path: &str, bearer: Option<&str>, limit: Duration) -> HttpAnswer {
    let request = GetRequest { path, accept: "application/json", bearer, limit, max_body: BODY_LIMIT };
    match http_get::get(address, &request).await {
        Ok(answer) => HttpAnswer::Status(answer.status, String::from_utf8_lossy(&answer.body).into_owned()),
        Err(GetFailure::Refused) => HttpAnswer::Refused,
        Err(GetFailure::Unreachable | GetFailure::Silent) => HttpAnswer::TimedOut,
        Err(GetFailure::Failed(failure)) => HttpAnswer::Failed(failure),
        Err(GetFailure::NotHttp(first)) => HttpAnswer::NotHttp(first),
        Err(GetFailure::TooLarge) => {
            let large = std::io::Error::other(format!("the answer is larger than {BODY_LIMIT} bytes"));
            HttpAnswer::Failed(IoFailure::new(IoStep::Receive, &large))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::http_get::tests::answering;

    #[tokio::test]
    async fn what_came_back_is_the_probes_answer() {
        let limit = Duration::from_secs(5);
        let (address, server) = answering(b"HTTP/1.1 200 OK\r\n\r\n{\"data\":[]}".to_vec()).await;
        assert_eq!(get(address, "/v1/models", Some("k"), limit).await, HttpAnswer::Status(200, "{\"data\":[]}".into()));
        let asked = server.await.unwrap();
        assert!(asked.starts_with("GET /v1/models HTTP/1.0\r\n") && asked.contains("Accept: application/json\r\n"));
        assert_eq!(get(address, "/health", None, limit).await, HttpAnswer::Refused);

        let (address, server) = answering(b"SSH-2.0-OpenSSH_9.2 x\r\n\r\n".to_vec()).await;
        assert_eq!(get(address, "/health", None, limit).await, HttpAnswer::NotHttp("SSH-2.0-OpenSSH_9.2 x".into()));
        server.await.unwrap();

        let mut large = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        large.resize(large.len() + BODY_LIMIT + 1, b' ');
        let (address, server) = answering(large).await;
        let answer = get(address, "/health", None, limit).await;
        assert_eq!(answer.to_string(), format!("reading the answer: the answer is larger than {BODY_LIMIT} bytes"));
        server.await.unwrap();
    }
}
