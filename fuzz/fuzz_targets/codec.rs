//! The log codecs on any bytes: a typed error or a record that re-encodes
//! to bytes that decode to the same record; never a panic or an unbounded
//! allocation. (Its first finding: a NaN in an embedding decoded; the codec
//! now refuses non-finite embedding values.)
#![no_main]

use std::sync::LazyLock;

use chronicle_codec::AvroCodec;
use chronicle_model::{Command, EventBatch};
use libfuzzer_sys::fuzz_target;

static COMMANDS: LazyLock<AvroCodec<Command>> = LazyLock::new(AvroCodec::new);
static EVENTS: LazyLock<AvroCodec<EventBatch>> = LazyLock::new(AvroCodec::new);

fuzz_target!(|data: &[u8]| {
    if let Ok(command) = COMMANDS.decode(data) {
        let bytes = COMMANDS.encode(&command);
        let again = COMMANDS.decode(&bytes).expect("re-decodes");
        assert_eq!(again, command);
    }
    if let Ok(batch) = EVENTS.decode(data) {
        let bytes = EVENTS.encode(&batch);
        let again = EVENTS.decode(&bytes).expect("re-decodes");
        assert_eq!(again, batch);
    }
});
