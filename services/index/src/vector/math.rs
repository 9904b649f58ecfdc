//! Dot products on unit vectors: cosine similarity after normalization.

use hnsw_rs::prelude::Distance;

/// Dot product, written in eight lanes so the compiler vectorizes it.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    let mut sum: f32 = lanes.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
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

/// `1 - cosine` on unit vectors, clamped at zero: hnsw_rs asserts distances
/// are non-negative, and rounding can push the dot of a vector with itself a
/// hair above one (anndists' `DistDot` then panics).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UnitDot;

impl Distance<f32> for UnitDot {
    fn eval(&self, va: &[f32], vb: &[f32]) -> f32 {
        (1.0 - dot(va, vb)).max(0.0)
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
    fn distance_of_a_vector_to_itself_is_never_negative() {
        let v = normalized(&[0.1, 0.7, 0.3, 0.9, 0.2]).expect("has a direction");
        assert!(UnitDot.eval(&v, &v) >= 0.0);
        assert!(UnitDot.eval(&v, &v) < 1e-6);
    }
}
