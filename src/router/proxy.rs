//! A request on its way to an engine and the answer on its way back: the same method, path,
//! headers and body, minus what belongs to one hop of the connection (RFC 9110 §7.6.1:
//! `Connection` and the fields it names, `Keep-Alive`, `TE`, `Trailer`, `Transfer-Encoding`,
//! `Upgrade`, `Proxy-*`) and minus the client's `Authorization` (the router's key, checked here;
//! the engine's own key, if any, is put in its place when sent). The answer's body is passed on
//! frame by frame, never gathered: a streamed completion's events reach the client as the engine
//! writes them.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{
    HeaderMap, HeaderName, AUTHORIZATION, CONNECTION, CONTENT_LENGTH, EXPECT, TE, TRAILER, TRANSFER_ENCODING, UPGRADE,
};
use hyper::http::request;
use hyper::{Request, Response, Version};

use super::upstream::UpstreamBody;

/// The request for the engine: `head` as the client sent it, with `body` read whole.
pub fn upstream_request(head: request::Parts, body: Bytes) -> Request<Full<Bytes>> {
    let mut request = Request::from_parts(head, Full::new(body));
    // HTTP/1.1 to the engine whatever the client spoke: a 1.0 request would ask it for an answer
    // without chunks, ended by closing the connection.
    *request.version_mut() = Version::HTTP_11;
    let path = request.uri().path_and_query().map_or("/", |path| path.as_str());
    if let Ok(origin_form) = path.parse() {
        *request.uri_mut() = origin_form;
    }
    let headers = request.headers_mut();
    drop_hop_by_hop(headers);
    // The body is read whole: its length is known again, and nothing is left to ask to continue.
    for name in [AUTHORIZATION, CONTENT_LENGTH, EXPECT] {
        headers.remove(name);
    }
    request
}

/// The answer for the client: the engine's status and headers, its body as it streams.
pub fn client_response(mut answer: Response<UpstreamBody>) -> Response<UpstreamBody> {
    drop_hop_by_hop(answer.headers_mut());
    answer
}

fn drop_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [CONNECTION, TE, TRAILER, TRANSFER_ENCODING, UPGRADE] {
        headers.remove(name);
    }
    for name in ["keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization"] {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_gets_the_clients_request_without_its_hop_and_key() {
        let request = Request::post("http://router:8000/v1/chat/completions?x=1")
            .header("content-type", "application/json")
            .header("authorization", "Bearer sk-router")
            .header("connection", "keep-alive, x-trace")
            .header("x-trace", "1")
            .header("keep-alive", "timeout=5")
            .header("transfer-encoding", "chunked")
            .header("content-length", "999")
            .header("expect", "100-continue")
            .header("x-request-id", "abc")
            .version(Version::HTTP_10)
            .body(())
            .unwrap();
        let (head, ()) = request.into_parts();
        let forwarded = upstream_request(head, Bytes::from_static(b"{\"model\":\"m\"}"));
        assert_eq!(forwarded.uri().to_string(), "/v1/chat/completions?x=1");
        assert_eq!(forwarded.version(), Version::HTTP_11);
        let names: Vec<&str> = forwarded.headers().keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "x-request-id"]);
    }
}
