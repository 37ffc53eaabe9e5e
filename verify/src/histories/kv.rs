//! Porcupine's key-value store with get, put and append: each key holds a string that
//! starts empty. Checked per key, or — as Porcupine's slow tests do — as one whole map.

use std::{
    fmt,
    hash::{Hash, Hasher},
    rc::Rc,
};

use crate::linearizability::Model;

/// What a client asks of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvOp {
    /// Read a key.
    Get(String),
    /// Replace a key's value.
    Put(String, String),
    /// Append to a key's value.
    Append(String, String),
}

impl KvOp {
    fn key(&self) -> &str {
        match self {
            KvOp::Get(k) | KvOp::Put(k, _) | KvOp::Append(k, _) => k,
        }
    }
}

/// What a client saw, and what the model answers: a get's value, or an acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvAnswer {
    /// A get returned this (`""`: the key is absent).
    Value(Rc<str>),
    /// A put or append was acknowledged.
    Done,
}

/// A partition: one key, or the whole store.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct KvKey(Option<String>);

impl fmt::Display for KvKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(key) => write!(f, "key {key:?}"),
            None => Ok(()),
        }
    }
}

/// The store model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kv {
    /// Check each key on its own (P-compositionality: linearizable per key is linearizable).
    pub partitioned: bool,
}

/// A key's value, shared by every state that holds it: a copy costs a reference count,
/// and hashing costs one word, because a hash of the text (polynomial, so extended piece by
/// piece on append) is kept with it. States are hashed whenever the search meets one, and
/// appended values grow long.
#[derive(Debug, Clone, Eq)]
pub struct Value {
    text: Rc<str>,
    hash: u64,
}

impl Value {
    fn new(text: &str) -> Self {
        Self {
            text: text.into(),
            hash: extend(0, text),
        }
    }

    fn append(&self, piece: &str) -> Self {
        Self {
            text: [&*self.text, piece].concat().into(),
            hash: extend(self.hash, piece),
        }
    }
}

/// The polynomial hash of `prefix + piece`, given the hash of `prefix`.
fn extend(hash: u64, piece: &str) -> u64 {
    piece.bytes().fold(hash, |h, b| {
        h.wrapping_mul(0x100_0000_01b3)
            .wrapping_add(u64::from(b) + 1)
    })
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.text == other.text
    }
}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Non-empty values by key, sorted by key; an empty value is absent, so equal stores
/// compare equal.
pub type Store = Vec<(Rc<str>, Value)>;

impl Model for Kv {
    type Key = KvKey;
    type Input = KvOp;
    type Output = KvAnswer;
    type Answer = KvAnswer;
    type State = Store;

    fn partition(&self, op: &KvOp) -> KvKey {
        KvKey(self.partitioned.then(|| op.key().to_owned()))
    }

    fn init(&self, _: &KvKey) -> Store {
        Store::new()
    }

    fn step(&self, store: &Store, op: &KvOp) -> (KvAnswer, Option<Store>) {
        let slot = store.binary_search_by(|(k, _)| (**k).cmp(op.key()));
        let value = slot.ok().and_then(|i| store.get(i)).map(|(_, v)| v);
        let changed = match (op, value) {
            (KvOp::Get(_), Some(v)) => return (KvAnswer::Value(v.text.clone()), None),
            (KvOp::Get(_), None) => return (KvAnswer::Value("".into()), None),
            (KvOp::Append(_, piece), _) if piece.is_empty() => return (KvAnswer::Done, None),
            (KvOp::Put(_, v), _) if v.is_empty() => None,
            (KvOp::Put(_, v), _) => Some(Value::new(v)),
            (KvOp::Append(_, piece), Some(v)) => Some(v.append(piece)),
            (KvOp::Append(_, piece), None) => Some(Value::new(piece)),
        };
        let mut next = store.clone();
        match (slot, changed) {
            (Ok(i), Some(v)) => next[i].1 = v,
            (Ok(i), None) => {
                next.remove(i);
            }
            (Err(i), Some(v)) => next.insert(i, (op.key().into(), v)),
            (Err(_), None) => return (KvAnswer::Done, None),
        }
        (KvAnswer::Done, Some(next))
    }

    fn matches(&self, recorded: &KvAnswer, answer: &KvAnswer) -> bool {
        recorded == answer
    }

    /// Gets never change the store.
    fn settled_when_idle(&self, op: &KvOp, _: &KvAnswer) -> bool {
        matches!(op, KvOp::Get(_))
    }

    fn describe(&self, store: &Store) -> String {
        if store.is_empty() {
            return "every key empty".into();
        }
        let entries: Vec<String> = store
            .iter()
            .map(|(k, v)| format!("{k:?}={:?}", v.text))
            .collect();
        entries.join(" ")
    }
}

impl fmt::Display for KvOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvOp::Get(k) => write!(f, "get {k:?}"),
            KvOp::Put(k, v) => write!(f, "put {k:?} {v:?}"),
            KvOp::Append(k, v) => write!(f, "append {k:?} {v:?}"),
        }
    }
}

impl fmt::Display for KvAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvAnswer::Value(v) => write!(f, "{v:?}"),
            KvAnswer::Done => f.write_str("ok"),
        }
    }
}
