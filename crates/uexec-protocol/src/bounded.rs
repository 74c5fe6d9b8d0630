//! Lists and maps of bounded length, for the params a peer sends.
//!
//! Why: a `Vec<String>` costs 24 bytes per item plus an allocation, and `["",""…]` is 3 bytes
//! of JSON per item, so one 64 MiB frame could ask for ~1 GiB. Reading stops at
//! [`MAX_ITEMS`] with an error instead (a `-32602` for the params).

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Error, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// Most items of one list or map in params (argv, env, patterns). More than any process can
/// take: Linux's `ARG_MAX` (2 MiB by default) counts a pointer per argument and variable.
pub const MAX_ITEMS: usize = 131_072;

/// A list of at most [`MAX_ITEMS`] items.
pub fn bounded_vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct SeqVisitor<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for SeqVisitor<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a list of at most {MAX_ITEMS} items")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
            while let Some(item) = seq.next_element()? {
                if items.len() == MAX_ITEMS {
                    return Err(A::Error::custom(format!(
                        "more than {MAX_ITEMS} items in a list"
                    )));
                }
                items.push(item);
            }
            Ok(items)
        }
    }
    deserializer.deserialize_seq(SeqVisitor(PhantomData))
}

/// A map of at most [`MAX_ITEMS`] entries.
pub fn bounded_map<'de, D, K, V>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Ord,
    V: Deserialize<'de>,
{
    struct MapVisitor<K, V>(PhantomData<(K, V)>);
    impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> Visitor<'de> for MapVisitor<K, V> {
        type Value = BTreeMap<K, V>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a map of at most {MAX_ITEMS} entries")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BTreeMap<K, V>, A::Error> {
            let mut entries = BTreeMap::new();
            let mut read = 0usize;
            while let Some((key, value)) = map.next_entry()? {
                read += 1;
                if read > MAX_ITEMS {
                    return Err(A::Error::custom(format!(
                        "more than {MAX_ITEMS} entries in a map"
                    )));
                }
                entries.insert(key, value);
            }
            Ok(entries)
        }
    }
    deserializer.deserialize_map(MapVisitor(PhantomData))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Lists {
        #[serde(deserialize_with = "bounded_vec")]
        list: Vec<String>,
        #[serde(deserialize_with = "bounded_map")]
        map: BTreeMap<String, String>,
    }

    #[test]
    fn lists_and_maps_stop_past_the_bound() {
        let items = vec![r#""""#; MAX_ITEMS].join(",");
        let ok = format!(r#"{{"list":[{items}],"map":{{"a":"b"}}}}"#);
        let lists: Lists = serde_json::from_str(&ok).unwrap();
        assert_eq!((lists.list.len(), lists.map.len()), (MAX_ITEMS, 1));
        let too_long = format!(r#"{{"list":[{items},""],"map":{{}}}}"#);
        let err = serde_json::from_str::<Lists>(&too_long).err().unwrap();
        assert!(err.to_string().contains("more than"), "{err}");
        let entries: Vec<String> = (0..=MAX_ITEMS).map(|i| format!(r#""{i}":"""#)).collect();
        let too_many = format!(r#"{{"list":[],"map":{{{}}}}}"#, entries.join(","));
        assert!(serde_json::from_str::<Lists>(&too_many).is_err());
    }
}
