//! How an embedding is serialized: a list of numbers in human-readable
//! formats (JSON: the API, the embedded store's rows), raw little-endian
//! `f32` bytes in binary ones (MessagePack: the processor's state), where a
//! list costs five bytes and a parse per component. Either form reads back
//! the same values bit for bit, and a binary reader also takes the list, so
//! state written before still loads.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::Serializer;

/// An embedding as little-endian `f32` bytes: how every binary store keeps
/// one (the embedded store, ScyllaDB blobs, the index's documents).
pub fn embedding_to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The embedding held in `bytes`; `None` unless they are a whole number of
/// `f32`s.
pub fn embedding_from_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    bytes.len().is_multiple_of(4).then(|| {
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    })
}

/// `#[serde(with = "crate::embedding::optional")]` for `Option<Vec<f32>>`.
pub(crate) mod optional {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        value: &Option<Vec<f32>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            None => serializer.serialize_none(),
            Some(v) if serializer.is_human_readable() => serializer.serialize_some(v),
            Some(v) => serializer.serialize_some(&AsBytes(v)),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Vec<f32>>, D::Error> {
        deserializer.deserialize_option(OptionalVector)
    }
}

struct AsBytes<'a>(&'a [f32]);

impl serde::Serialize for AsBytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&embedding_to_bytes(self.0))
    }
}

struct OptionalVector;

impl<'de> Visitor<'de> for OptionalVector {
    type Value = Option<Vec<f32>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an optional embedding")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(Vector).map(Some)
    }
}

struct Vector;

impl<'de> Visitor<'de> for Vector {
    type Value = Vec<f32>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of numbers or little-endian f32 bytes")
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Self::Value, E> {
        embedding_from_bytes(bytes)
            .ok_or_else(|| E::invalid_length(bytes.len(), &"a multiple of 4 bytes"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(x) = seq.next_element::<f32>()? {
            out.push(x);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        #[serde(with = "super::optional")]
        v: Option<Vec<f32>>,
    }

    #[derive(Serialize)]
    struct Listed {
        v: Option<Vec<f32>>,
    }

    #[test]
    fn json_keeps_a_list_and_messagepack_takes_bytes() {
        let some = Holder {
            v: Some(vec![0.1, -2.5, f32::MIN_POSITIVE, 1e-7]),
        };
        let none = Holder { v: None };
        let json = serde_json::to_string(&some).unwrap();
        assert!(json.starts_with(r#"{"v":[0.1,-2.5,"#), "{json}");
        assert_eq!(serde_json::from_str::<Holder>(&json).unwrap(), some);
        assert_eq!(
            serde_json::from_str::<Holder>(r#"{"v":null}"#).unwrap(),
            none
        );
        for value in [&some, &none] {
            let packed = rmp_serde::to_vec_named(value).unwrap();
            assert_eq!(&rmp_serde::from_slice::<Holder>(&packed).unwrap(), value);
        }
        // 4 bytes a component plus a small header, not 5 per component
        let long = Holder {
            v: Some(vec![0.25; 384]),
        };
        assert!(rmp_serde::to_vec_named(&long).unwrap().len() < 384 * 4 + 16);
        // state written as a list of numbers still reads
        let listed = rmp_serde::to_vec_named(&Listed { v: some.v.clone() }).unwrap();
        assert_eq!(rmp_serde::from_slice::<Holder>(&listed).unwrap(), some);
    }
}
