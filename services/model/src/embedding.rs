//! How an embedding is kept: a list of numbers in human-readable formats
//! (JSON: the API, the embedded store's rows), bytes in binary ones (the
//! log, the embedded store's vectors, ScyllaDB blobs, the index, the
//! processor's state in MessagePack).
//!
//! Embeddings enter the graph through one door, [`round_to_half`]: every
//! component is rounded to the nearest IEEE half-precision value, so every
//! binary copy can keep two bytes a component and still read back the very
//! values the decision saw, bit for bit (rebuild and replay stay exact).
//! A unit vector's components lie in [-1, 1], where half precision keeps
//! about three decimal digits: cosines move by well under 1e-3. Vectors
//! that are not half-exact (written before, or beyond half's range) keep
//! four bytes a component, so no encoding ever loses a bit.

use std::fmt;

use half::f16;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::Serializer;

/// The first byte of a half-precision encoding. Its length, `1 + 2n`, is
/// odd, and a four-byte-a-component one never is: the two never mix up.
const HALF_TAG: u8 = 0x16;

/// Rounds every component to the nearest half-precision value, the form in
/// which an embedding enters the graph. `None` when a component is not
/// finite or does not fit half's range (|x| > 65504): such a vector would
/// poison every distance it enters.
pub fn round_to_half(v: &mut [f32]) -> Option<()> {
    for x in v.iter_mut() {
        let h = f16::from_f32(*x);
        if !h.is_finite() {
            return None;
        }
        *x = h.to_f32();
    }
    Some(())
}

/// An embedding as bytes: two a component (half precision, after a tag
/// byte) when every component is half-exact, else four (little-endian
/// `f32`). Either way [`embedding_from_bytes`] gives back the same values.
pub fn embedding_to_bytes(v: &[f32]) -> Vec<u8> {
    let halves: Option<Vec<f16>> = v
        .iter()
        .map(|&x| {
            let h = f16::from_f32(x);
            (h.to_f32().to_bits() == x.to_bits()).then_some(h)
        })
        .collect();
    match halves {
        Some(halves) => std::iter::once(HALF_TAG)
            .chain(halves.iter().flat_map(|h| h.to_le_bytes()))
            .collect(),
        None => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// The embedding held in `bytes`; `None` unless they are a tagged run of
/// halves or a whole number of `f32`s.
pub fn embedding_from_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    if bytes.len() % 2 == 1 {
        let (&tag, halves) = bytes.split_first()?;
        return (tag == HALF_TAG).then(|| {
            halves
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect()
        });
    }
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
        f.write_str("a list of numbers or embedding bytes")
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Self::Value, E> {
        embedding_from_bytes(bytes).ok_or_else(|| {
            E::invalid_length(bytes.len(), &"tagged halves or a multiple of 4 bytes")
        })
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
        // half-exact vectors take 2 bytes a component
        let mut half = vec![0.1_f32; 384];
        super::round_to_half(&mut half).unwrap();
        let packed = rmp_serde::to_vec_named(&Holder {
            v: Some(half.clone()),
        })
        .unwrap();
        assert!(packed.len() < 384 * 2 + 16, "{}", packed.len());
        assert_eq!(
            rmp_serde::from_slice::<Holder>(&packed).unwrap().v,
            Some(half)
        );
        // state written as a list of numbers still reads
        let listed = rmp_serde::to_vec_named(&Listed { v: some.v.clone() }).unwrap();
        assert_eq!(rmp_serde::from_slice::<Holder>(&listed).unwrap(), some);
    }

    #[test]
    fn both_byte_forms_read_back_bit_for_bit() {
        use super::*;
        let mut half = vec![0.1_f32, -0.75, 1.0, 0.0, -0.0, 6.1e-5, 65504.0];
        round_to_half(&mut half).unwrap();
        let bytes = embedding_to_bytes(&half);
        assert_eq!(bytes.len(), 1 + 2 * half.len());
        let back = embedding_from_bytes(&bytes).unwrap();
        assert!(
            back.iter()
                .zip(&half)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        // not half-exact: four bytes a component, exact
        let full = vec![0.1_f32, 1e-7, -2.5];
        let bytes = embedding_to_bytes(&full);
        assert_eq!(bytes.len(), 12);
        assert_eq!(embedding_from_bytes(&bytes).unwrap(), full);
        // empty, a wrong tag, a ragged length
        assert_eq!(embedding_from_bytes(&embedding_to_bytes(&[])), Some(vec![]));
        assert_eq!(embedding_from_bytes(&[0x17, 0, 0]), None);
        assert_eq!(embedding_from_bytes(&[1, 2, 3, 4, 5, 6]), None);
    }

    #[test]
    fn rounding_refuses_what_half_cannot_hold_and_keeps_cosines() {
        use super::*;
        assert!(round_to_half(&mut [f32::NAN]).is_none());
        assert!(round_to_half(&mut [1e6]).is_none());
        let mut v: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 400.0)
            .collect();
        let w = v.clone();
        round_to_half(&mut v).unwrap();
        let cos = |a: &[f32], b: &[f32]| {
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            dot / (a.iter().map(|x| x * x).sum::<f32>().sqrt()
                * b.iter().map(|x| x * x).sum::<f32>().sqrt())
        };
        assert!(cos(&v, &w) > 0.9999, "{}", cos(&v, &w));
    }
}
