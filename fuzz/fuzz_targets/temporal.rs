//! The temporal parser: any text against any reference instant resolves or
//! declines, never panics ("300000000 days ago" once did).
#![no_main]

use chronicle_engine::temporal;
use chronicle_model::Timestamp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, text)) = data.split_first_chunk::<8>() else {
        return;
    };
    let span = Timestamp::MAX.as_micros() - Timestamp::MIN.as_micros();
    let micros = Timestamp::MIN.as_micros() + i64::from_le_bytes(*head).rem_euclid(span);
    let reference = Timestamp::from_micros(micros).expect("within the span");
    let text = String::from_utf8_lossy(text);
    if let Some(t) = temporal::resolve(&text, reference) {
        assert!((Timestamp::MIN..=Timestamp::MAX).contains(&t));
    }
    let _ = temporal::period_in(&text, reference);
});
