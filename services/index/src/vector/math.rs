//! Dot products on unit vectors (cosine similarity after normalization),
//! and the int8 codes vectors are held as in memory.
//!
//! A code is a unit vector scaled so its largest component is ±127, rounded
//! to `i8`, followed by the scale as four bytes (`f32` little-endian): one
//! slice carries everything a distance needs, so the same bytes serve the
//! exact scan and the HNSW graph. 388 bytes for 384 dimensions instead of
//! 1,536; the ranking error is removed by rescoring the best candidates
//! with their stored unit vectors (half precision, as every embedding in
//! the graph is: `SearchIndex::vector_search`).

use hnsw_rs::prelude::Distance;

/// Dot product.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    lane_dot(a, b, |y| y)
}

/// The dot of `a` with `b` read as `f32`s, written in eight lanes so the
/// compiler vectorizes it.
fn lane_dot<T: Copy>(a: &[f32], b: &[T], as_f32: impl Fn(T) -> f32) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * as_f32(y[i]);
        }
    }
    let mut sum: f32 = lanes.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        sum += x * as_f32(*y);
    }
    sum
}

/// Scales `v` to unit length; `None` when it has no direction (zero norm or
/// a non-finite component).
pub(crate) fn normalized(v: &[f32]) -> Option<Vec<f32>> {
    if v.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let norm = dot(v, v).sqrt();
    if !norm.is_normal() {
        return None;
    }
    Some(v.iter().map(|x| x / norm).collect())
}

/// The unit vector the index keeps for `v`: normalized, then rounded to
/// half precision like every embedding in the graph (two bytes a component
/// in the document store). `None` when `v` has no direction.
pub(crate) fn stored_unit(v: &[f32]) -> Option<Vec<f32>> {
    let mut unit = normalized(v)?;
    chronicle_model::round_to_half(&mut unit)?;
    Some(unit)
}

/// Bytes of a code beyond its components: the scale.
const SCALE_BYTES: usize = 4;

/// Length of the code of a `dimension`-vector.
pub(crate) fn code_len(dimension: usize) -> usize {
    dimension + SCALE_BYTES
}

/// The int8 code of a unit vector (see the module doc).
pub(crate) fn quantize(unit: &[f32]) -> Vec<i8> {
    let largest = unit.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if largest > 0.0 { largest / 127.0 } else { 0.0 };
    let mut code: Vec<i8> = unit
        .iter()
        .map(|x| {
            if scale > 0.0 {
                (x / scale).round().clamp(-127.0, 127.0) as i8
            } else {
                0
            }
        })
        .collect();
    code.extend(scale.to_le_bytes().map(|b| b as i8));
    code
}

fn split_code(code: &[i8]) -> (&[i8], f32) {
    let (components, scale) = code.split_at(code.len() - SCALE_BYTES);
    let scale = f32::from_le_bytes([
        scale[0] as u8,
        scale[1] as u8,
        scale[2] as u8,
        scale[3] as u8,
    ]);
    (components, scale)
}

/// The dot of an `f32` query with a coded vector (the query is not
/// quantized, so only the stored side carries rounding error).
pub(crate) fn query_dot(query: &[f32], code: &[i8]) -> f32 {
    let (components, scale) = split_code(code);
    lane_dot(query, components, f32::from) * scale
}

/// The dot of two coded vectors, in integers then scaled.
fn code_dot(a: &[i8], b: &[i8]) -> f32 {
    let ((ca, sa), (cb, sb)) = (split_code(a), split_code(b));
    debug_assert_eq!(ca.len(), cb.len());
    let sum: i32 = ca
        .iter()
        .zip(cb)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    sum as f32 * sa * sb
}

/// `1 - cosine` between two codes, clamped at zero (hnsw_rs asserts
/// distances are non-negative): the graph's metric.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CodeDot;

impl Distance<i8> for CodeDot {
    fn eval(&self, va: &[i8], vb: &[i8]) -> f32 {
        (1.0 - code_dot(va, vb)).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_naive_for_odd_lengths() {
        for len in [1, 7, 8, 9, 17, 384] {
            let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - naive).abs() < 1e-4, "len {len}");
        }
    }

    #[test]
    fn normalized_rejects_directionless_vectors() {
        assert!(normalized(&[0.0, 0.0]).is_none());
        assert!(normalized(&[1.0, f32::NAN]).is_none());
        assert!(normalized(&[f32::INFINITY, 0.0]).is_none());
        let v = normalized(&[3.0, 4.0]).expect("has a direction");
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
    }

    #[test]
    fn codes_keep_the_dot_within_a_hundredth() {
        let unit_of = |seed: f32| {
            let v: Vec<f32> = (0..384).map(|i| (i as f32 * seed).sin()).collect();
            normalized(&v).expect("has a direction")
        };
        for (a, b) in [(0.37, 0.11), (0.5, 0.5), (1.3, 0.07)] {
            let (a, b) = (unit_of(a), unit_of(b));
            let (ca, cb) = (quantize(&a), quantize(&b));
            assert_eq!(ca.len(), code_len(384));
            let exact = dot(&a, &b);
            assert!((query_dot(&a, &cb) - exact).abs() < 0.01);
            assert!((code_dot(&ca, &cb) - exact).abs() < 0.01);
        }
        assert!(CodeDot.eval(&quantize(&unit_of(0.3)), &quantize(&unit_of(0.3))) < 0.01);
        let zero = quantize(&[0.0; 4]);
        assert_eq!(query_dot(&[1.0; 4], &zero), 0.0);
    }
}
