//! What the remote-backend tests share: a cuttable TCP proxy, the servers under test, and
//! the scenarios every exec server must pass under the engine.

pub mod peer;
pub mod proxy;
pub mod scenarios;
