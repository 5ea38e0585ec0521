//! What the head serves on the cluster link, and what every node needs to reach it: the link's
//! address ([`address`]), TLS with the cluster CA ([`tls`], [`ca`], kept in the head's
//! [`home`]), the bounded accept loop and request head every server shares ([`server`],
//! [`http1`]), the ports the serving engines listen on there ([`ports`]), and the agent's table of
//! servers kept running between calls ([`kept_tasks`]). The client side: the one GET asked of an
//! engine's or the router's HTTP server ([`http_get`]), and how a connection failed
//! ([`io_failure`]).
//! Nothing unauthenticated listens beyond the link: the CA signs the only clients the head's
//! servers accept.

pub(crate) mod address;
pub(crate) mod ca;
pub(crate) mod home;
pub(crate) mod http1;
pub(crate) mod http_get;
pub(crate) mod io_failure;
pub(crate) mod kept_tasks;
pub(crate) mod ports;
pub(crate) mod server;
pub(crate) mod tls;
