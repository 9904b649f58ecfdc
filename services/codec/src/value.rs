//! Small helpers for building and taking apart Avro values.

use apache_avro::types::Value;
use chronicle_model::{Attributes, GroupId, Timestamp};
use uuid::Uuid;

use crate::CodecError;

pub(crate) fn uuid(u: Uuid) -> Value {
    Value::Uuid(u)
}

pub(crate) fn ts(t: Timestamp) -> Value {
    Value::TimestampMicros(t.as_micros())
}

pub(crate) fn string(s: &str) -> Value {
    Value::String(s.to_owned())
}

/// An optional value as the `["null", T]` union.
pub(crate) fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> Value) -> Value {
    match v {
        None => Value::Union(0, Box::new(Value::Null)),
        Some(x) => Value::Union(1, Box::new(f(x))),
    }
}

pub(crate) fn uuids(us: &[Uuid]) -> Value {
    Value::Array(us.iter().copied().map(Value::Uuid).collect())
}

pub(crate) fn strings(ss: &[String]) -> Value {
    Value::Array(ss.iter().map(|s| Value::String(s.clone())).collect())
}

/// An optional embedding as the `["null", array<float>, bytes]` union, in
/// its bytes branch: two bytes a component where a list costs four and a
/// block header.
pub(crate) fn embedding(v: Option<&[f32]>) -> Value {
    match v {
        None => Value::Union(0, Box::new(Value::Null)),
        Some(v) => Value::Union(
            2,
            Box::new(Value::Bytes(chronicle_model::embedding_to_bytes(v))),
        ),
    }
}

pub(crate) fn json(map: &Attributes) -> Value {
    Value::String(serde_json::to_string(map).expect("a JSON map serializes"))
}

pub(crate) fn record(fields: Vec<(&str, Value)>) -> Value {
    Value::Record(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// The fields of a decoded record, taken out by name.
pub(crate) struct Fields {
    path: String,
    fields: Vec<(String, Value)>,
}

impl Fields {
    pub(crate) fn of(value: Value, path: &str) -> Result<Self, CodecError> {
        match value {
            Value::Record(fields) => Ok(Fields {
                path: path.to_owned(),
                fields,
            }),
            other => Err(CodecError::field(
                path,
                format!("expected a record, found {other:?}"),
            )),
        }
    }

    pub(crate) fn path(&self, name: &str) -> String {
        format!("{}.{name}", self.path)
    }

    pub(crate) fn take(&mut self, name: &str) -> Result<Value, CodecError> {
        let i = self
            .fields
            .iter()
            .position(|(k, _)| k == name)
            .ok_or_else(|| CodecError::field(self.path(name), "missing"))?;
        Ok(std::mem::replace(&mut self.fields[i].1, Value::Null))
    }

    fn err(&self, name: &str, expected: &str, found: &Value) -> CodecError {
        CodecError::field(
            self.path(name),
            format!("expected {expected}, found {found:?}"),
        )
    }

    pub(crate) fn string(&mut self, name: &str) -> Result<String, CodecError> {
        match self.take(name)? {
            Value::String(s) => Ok(s),
            other => Err(self.err(name, "a string", &other)),
        }
    }

    pub(crate) fn uuid(&mut self, name: &str) -> Result<Uuid, CodecError> {
        let v = self.take(name)?;
        self.as_uuid(name, v)
    }

    fn as_uuid(&self, name: &str, v: Value) -> Result<Uuid, CodecError> {
        match v {
            Value::Uuid(u) => Ok(u),
            Value::String(s) => {
                Uuid::parse_str(&s).map_err(|e| CodecError::field(self.path(name), e))
            }
            other => Err(self.err(name, "a uuid", &other)),
        }
    }

    fn as_ts(&self, name: &str, v: Value) -> Result<Timestamp, CodecError> {
        match v {
            Value::TimestampMicros(m) | Value::Long(m) => {
                Timestamp::from_micros(m).map_err(|e| CodecError::field(self.path(name), e))
            }
            other => Err(self.err(name, "a timestamp-micros", &other)),
        }
    }

    pub(crate) fn ts(&mut self, name: &str) -> Result<Timestamp, CodecError> {
        let v = self.take(name)?;
        self.as_ts(name, v)
    }

    pub(crate) fn int(&mut self, name: &str) -> Result<i32, CodecError> {
        match self.take(name)? {
            Value::Int(i) => Ok(i),
            other => Err(self.err(name, "an int", &other)),
        }
    }

    pub(crate) fn long(&mut self, name: &str) -> Result<i64, CodecError> {
        match self.take(name)? {
            Value::Long(i) => Ok(i),
            other => Err(self.err(name, "a long", &other)),
        }
    }

    pub(crate) fn group(&mut self, name: &str) -> Result<GroupId, CodecError> {
        let s = self.string(name)?;
        GroupId::new(s).map_err(|e| CodecError::field(self.path(name), e))
    }

    /// The inner value of a `["null", T]` union.
    pub(crate) fn optional(&mut self, name: &str) -> Result<Option<Value>, CodecError> {
        match self.take(name)? {
            Value::Null => Ok(None),
            Value::Union(_, inner) => match *inner {
                Value::Null => Ok(None),
                v => Ok(Some(v)),
            },
            v => Ok(Some(v)),
        }
    }

    pub(crate) fn opt_string(&mut self, name: &str) -> Result<Option<String>, CodecError> {
        match self.optional(name)? {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.err(name, "a string", &other)),
        }
    }

    pub(crate) fn opt_uuid(&mut self, name: &str) -> Result<Option<Uuid>, CodecError> {
        self.optional(name)?
            .map(|v| self.as_uuid(name, v))
            .transpose()
    }

    pub(crate) fn opt_ts(&mut self, name: &str) -> Result<Option<Timestamp>, CodecError> {
        self.optional(name)?
            .map(|v| self.as_ts(name, v))
            .transpose()
    }

    pub(crate) fn array(&mut self, name: &str) -> Result<Vec<Value>, CodecError> {
        match self.take(name)? {
            Value::Array(items) => Ok(items),
            other => Err(self.err(name, "an array", &other)),
        }
    }

    pub(crate) fn uuids(&mut self, name: &str) -> Result<Vec<Uuid>, CodecError> {
        let items = self.array(name)?;
        items.into_iter().map(|v| self.as_uuid(name, v)).collect()
    }

    pub(crate) fn strings_of(
        &self,
        name: &str,
        items: Vec<Value>,
    ) -> Result<Vec<String>, CodecError> {
        items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                other => Err(self.err(name, "a string", &other)),
            })
            .collect()
    }

    pub(crate) fn strings(&mut self, name: &str) -> Result<Vec<String>, CodecError> {
        let items = self.array(name)?;
        self.strings_of(name, items)
    }

    pub(crate) fn opt_strings(&mut self, name: &str) -> Result<Option<Vec<String>>, CodecError> {
        match self.optional(name)? {
            None => Ok(None),
            Some(Value::Array(items)) => self.strings_of(name, items).map(Some),
            Some(other) => Err(self.err(name, "an array", &other)),
        }
    }

    pub(crate) fn opt_uuids(&mut self, name: &str) -> Result<Option<Vec<Uuid>>, CodecError> {
        match self.optional(name)? {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|v| self.as_uuid(name, v))
                .collect::<Result<_, _>>()
                .map(Some),
            Some(other) => Err(self.err(name, "an array", &other)),
        }
    }

    pub(crate) fn opt_embedding(&mut self, name: &str) -> Result<Option<Vec<f32>>, CodecError> {
        let vector: Vec<f32> = match self.optional(name)? {
            None => return Ok(None),
            // v5 and before: a list of floats
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|v| match v {
                    Value::Float(f) => Ok(f),
                    other => Err(self.err(name, "a float", &other)),
                })
                .collect::<Result<_, _>>()?,
            Some(Value::Bytes(bytes)) => {
                chronicle_model::embedding_from_bytes(&bytes).ok_or_else(|| {
                    CodecError::field(
                        self.path(name),
                        format!("{} bytes are no embedding", bytes.len()),
                    )
                })?
            }
            Some(other) => return Err(self.err(name, "an array or bytes", &other)),
        };
        // A NaN or infinity would poison every distance it enters (and the
        // indices' ordering): such a record is malformed.
        match vector.iter().find(|f| !f.is_finite()) {
            Some(f) => Err(CodecError::field(
                self.path(name),
                format!("{f} in an embedding; only finite values are allowed"),
            )),
            None => Ok(Some(vector)),
        }
    }

    fn parse_json(&self, name: &str, text: &str) -> Result<Attributes, CodecError> {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            Ok(_) => Err(CodecError::field(self.path(name), "expected a JSON object")),
            Err(e) => Err(CodecError::field(self.path(name), e)),
        }
    }

    pub(crate) fn json(&mut self, name: &str) -> Result<Attributes, CodecError> {
        let text = self.string(name)?;
        self.parse_json(name, &text)
    }

    pub(crate) fn opt_json(&mut self, name: &str) -> Result<Option<Attributes>, CodecError> {
        match self.opt_string(name)? {
            None => Ok(None),
            Some(text) => self.parse_json(name, &text).map(Some),
        }
    }

    pub(crate) fn enum_symbol(&mut self, name: &str) -> Result<String, CodecError> {
        match self.take(name)? {
            Value::Enum(_, symbol) => Ok(symbol),
            Value::String(s) => Ok(s),
            other => Err(self.err(name, "an enum symbol", &other)),
        }
    }

    /// A union of records: the branch index (in the reader schema) and the record.
    pub(crate) fn union(&mut self, name: &str) -> Result<(u32, Value), CodecError> {
        match self.take(name)? {
            Value::Union(i, inner) => Ok((i, *inner)),
            other => Err(self.err(name, "a union", &other)),
        }
    }
}
