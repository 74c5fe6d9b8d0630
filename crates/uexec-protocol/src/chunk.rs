//! Bytes on the wire: output and stdin travel as standard base64 (with padding) strings.
//!
//! [`ByteChunk`] holds [`Bytes`], so the same buffer can sit in a retention ring, go out in a
//! notification and again in a `process/read` answer without being copied.
//!
//! The codec is base64's runtime-detected SIMD engine (AVX2/NEON, else scalar): output floods
//! are base64-encoded byte for byte, and that was the largest cost of a flood.

use std::sync::LazyLock;

use base64::engine::{general_purpose, Simd};
use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Standard base64 with padding, the fastest way this CPU can do it.
pub(crate) static BASE64: LazyLock<Simd> = LazyLock::new(|| Simd::standard(general_purpose::PAD));

/// Raw bytes, serialized as a base64 string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ByteChunk(pub Bytes);

impl ByteChunk {
    /// The bytes.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// Decodes standard base64; the error names the first bad symbol.
    pub fn from_base64(text: &str) -> Result<Self, base64::DecodeError> {
        BASE64.decode(text).map(|v| Self(Bytes::from(v)))
    }

    /// Encodes as standard base64 with padding.
    pub fn to_base64(&self) -> String {
        BASE64.encode(&self.0)
    }
}

impl From<Bytes> for ByteChunk {
    fn from(bytes: Bytes) -> Self {
        Self(bytes)
    }
}

impl From<Vec<u8>> for ByteChunk {
    fn from(bytes: Vec<u8>) -> Self {
        Self(Bytes::from(bytes))
    }
}

impl Serialize for ByteChunk {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_base64())
    }
}

impl<'de> Deserialize<'de> for ByteChunk {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Self::from_base64(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json() {
        let chunk = ByteChunk::from(b"hi\n".to_vec());
        let json = serde_json::to_string(&chunk).unwrap();
        assert_eq!(json, "\"aGkK\"");
        assert_eq!(serde_json::from_str::<ByteChunk>(&json).unwrap(), chunk);
    }

    #[test]
    fn bad_base64_is_an_error_naming_the_symbol() {
        let err = serde_json::from_str::<ByteChunk>("\"!!!\"").unwrap_err();
        assert!(err.to_string().contains("Invalid symbol 33"), "{err}");
    }

    #[test]
    fn empty_string_is_an_empty_chunk() {
        assert_eq!(
            serde_json::from_str::<ByteChunk>("\"\"").unwrap(),
            ByteChunk::default()
        );
    }
}
