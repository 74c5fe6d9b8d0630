pub mod net;
pub mod serve;
