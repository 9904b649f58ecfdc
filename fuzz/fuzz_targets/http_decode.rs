//! The REST request decoders on any body or query string: a value or a 4xx
//! naming the field, never a panic or a 5xx.
#![no_main]

use chronicle::app::decode;
use chronicle::app::error::ApiError;
use chronicle_model::{GroupId, Timestamp};
use libfuzzer_sys::fuzz_target;

fn client_error<T>(result: Result<T, ApiError>) {
    if let Err(e) = result {
        assert!(e.status.is_client_error(), "{}: {}", e.status, e.error);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((which, body)) = data.split_first() else {
        return;
    };
    let group = GroupId::new("fuzz").expect("valid");
    let now = Timestamp::from_micros(1_733_000_000_000_000).expect("valid");
    let text = String::from_utf8_lossy(body);
    match which % 8 {
        0 => client_error(decode::episodes(&group, body, now)),
        1 => client_error(decode::triplets(&group, body, now)),
        2 => client_error(decode::search(body)),
        3 => client_error(decode::context(body)),
        4 => client_error(decode::list_query(Some(&text))),
        5 => client_error(decode::facts_query(Some(&text))),
        6 => client_error(decode::entity_ref("center", &text)),
        _ => {
            client_error(decode::group(&text));
            client_error(decode::path_uuid("uuid", &text));
            client_error(decode::no_params(Some(&text)));
        }
    }
});
