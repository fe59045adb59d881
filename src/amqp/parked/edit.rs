//! An operator's edit of a parked message: the body and the headers its copy
//! carries instead of the original's, and the audit trail the copy gains
//! (who, when, what changed). Nothing here does I/O.

use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};

use crate::retry::headers::{RETRY_EDITED_AT, RETRY_EDITED_BY, RETRY_EDITS};
use crate::retry::{is_broker_death_header, is_routing_header};

/// What an edited copy carries instead of the original's.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Edit {
    /// Who edited it: the audit trail's `by`.
    pub by: String,
    /// The copy's body; the original's when `None`.
    pub body: Option<Vec<u8>>,
    /// Headers the copy carries with these values, added or replaced.
    pub set: FieldTable,
    /// Headers the copy does not carry.
    pub remove: Vec<String>,
}

/// Why header `name` is not the operator's to edit, or `None` when it is:
/// the `retry-*` headers are the library's (a replayed copy's count starts
/// again, and its trail is written here), the broker's dead-letter history is
/// stripped from every copy, and `CC`/`BCC` are routing, never carried.
pub(crate) fn not_editable(name: &str) -> Option<&'static str> {
    if name.starts_with("retry-") {
        Some("the retry-* headers are rabbit-retry's own")
    } else if is_broker_death_header(name) {
        Some("the broker's dead-letter history is not carried by a replayed copy")
    } else if is_routing_header(name) {
        Some("CC and BCC route a publish, and no copy carries them")
    } else {
        None
    }
}

impl Edit {
    /// The edit, or why it cannot be made: a header of `set` or `remove` that
    /// is not the operator's, or no `by`.
    pub(crate) fn new(
        by: String,
        body: Option<Vec<u8>>,
        set: FieldTable,
        remove: Vec<String>,
    ) -> Result<Edit, String> {
        if by.trim().is_empty() {
            return Err("an edit names who made it (`by`)".into());
        }
        let names = set
            .inner()
            .keys()
            .map(|k| k.as_str())
            .chain(remove.iter().map(String::as_str));
        for name in names {
            if let Some(why) = not_editable(name) {
                return Err(format!("header '{name}' cannot be edited: {why}"));
            }
        }
        Ok(Edit {
            by,
            body,
            set,
            remove,
        })
    }

    /// Whether the copy leaves out the original's header `name`.
    pub(crate) fn removes(&self, name: &str) -> bool {
        self.remove.iter().any(|r| r == name)
    }

    /// Applies the edit to `headers` (the original's, less what
    /// [`Edit::removes`] leaves out, which `had` names) and records it in
    /// the audit trail, at `at` (ISO 8601): returns what changed, in the
    /// trail's words (`body`, `header <name>`).
    pub(crate) fn apply(
        &self,
        original_body: &[u8],
        had: &[String],
        headers: &mut FieldTable,
        at: &str,
    ) -> Vec<String> {
        let mut changed = Vec::new();
        if self.body.as_deref().is_some_and(|b| b != original_body) {
            changed.push("body".to_owned());
        }
        for (k, v) in self.set.inner() {
            if headers.inner().get(k) != Some(v) {
                changed.push(format!("header {}", k.as_str()));
                headers.insert(k.clone(), v.clone());
            }
        }
        for name in had {
            if !self.set.contains_key(name) {
                changed.push(format!("header {name}"));
            }
        }
        let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()));
        let mut entry = FieldTable::default();
        entry.insert(ShortString::from("by"), text(&self.by));
        entry.insert(ShortString::from("at"), text(at));
        let mut what = FieldArray::default();
        for c in &changed {
            what.push(text(c));
        }
        entry.insert(ShortString::from("changed"), AMQPValue::FieldArray(what));
        let mut trail = match headers.inner().get(RETRY_EDITS) {
            Some(AMQPValue::FieldArray(earlier)) => earlier.clone(),
            _ => FieldArray::default(),
        };
        trail.push(AMQPValue::FieldTable(entry));
        headers.insert(RETRY_EDITS.into(), AMQPValue::FieldArray(trail));
        headers.insert(RETRY_EDITED_BY.into(), text(&self.by));
        headers.insert(RETRY_EDITED_AT.into(), text(at));
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> AMQPValue {
        AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()))
    }

    fn table(pairs: &[(&str, AMQPValue)]) -> FieldTable {
        let mut t = FieldTable::default();
        for (k, v) in pairs {
            t.insert(ShortString::from(*k), v.clone());
        }
        t
    }

    fn trail_of(headers: &FieldTable) -> Vec<FieldTable> {
        match headers.inner().get(RETRY_EDITS) {
            Some(AMQPValue::FieldArray(a)) => a
                .as_slice()
                .iter()
                .map(|v| match v {
                    AMQPValue::FieldTable(t) => t.clone(),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_library_s_and_the_broker_s_headers_are_not_the_operator_s() {
        for name in [
            "retry-attempt",
            "retry-edits",
            "x-death",
            "x-first-death-queue",
            "x-delivery-count",
            "CC",
            "BCC",
        ] {
            let set = table(&[(name, text("v"))]);
            let err = Edit::new("ana".into(), None, set, vec![]).unwrap_err();
            assert!(err.contains(&format!("'{name}'")), "{err}");
            let err = Edit::new("ana".into(), None, FieldTable::default(), vec![name.into()])
                .unwrap_err();
            assert!(err.contains(&format!("'{name}'")), "{err}");
        }
        for name in ["customer-id", "x-tenant", "retry", "cc"] {
            assert_eq!(not_editable(name), None, "{name}");
        }
        assert!(Edit::new(" ".into(), None, FieldTable::default(), vec![]).is_err());
    }

    #[test]
    fn what_changed_is_recorded_and_what_did_not_is_not() {
        let edit = Edit::new(
            "ana".into(),
            Some(b"{\"qty\":2}".to_vec()),
            table(&[("tenant", text("eu")), ("kept", text("same"))]),
            vec!["stale".into(), "absent".into()],
        )
        .unwrap();
        assert!(edit.removes("stale") && !edit.removes("kept"));
        let mut headers = table(&[("kept", text("same")), ("tenant", text("us"))]);
        let changed = edit.apply(
            b"{\"qty\":\"two\"}",
            &["stale".into()],
            &mut headers,
            "2026-12-05T10:00:00.000Z",
        );
        assert_eq!(changed, ["body", "header tenant", "header stale"]);
        assert_eq!(headers.inner().get("tenant"), Some(&text("eu")));
        assert_eq!(headers.inner().get(RETRY_EDITED_BY), Some(&text("ana")));
        assert_eq!(
            headers.inner().get(RETRY_EDITED_AT),
            Some(&text("2026-12-05T10:00:00.000Z"))
        );
        let trail = trail_of(&headers);
        assert_eq!(trail.len(), 1);
        assert_eq!(trail[0].inner().get("by"), Some(&text("ana")));
        let mut what = FieldArray::default();
        for c in ["body", "header tenant", "header stale"] {
            what.push(text(c));
        }
        assert_eq!(
            trail[0].inner().get("changed"),
            Some(&AMQPValue::FieldArray(what))
        );
    }

    #[test]
    fn the_same_body_is_no_change_and_a_second_edit_extends_the_trail() {
        let body_only = |by: &str| {
            Edit::new(
                by.into(),
                Some(b"x".to_vec()),
                FieldTable::default(),
                vec![],
            )
            .unwrap()
        };
        let first = body_only("ana");
        let mut headers = FieldTable::default();
        assert_eq!(first.apply(b"y", &[], &mut headers, "t1"), ["body"]);
        let second = body_only("bo");
        assert!(second.apply(b"x", &[], &mut headers, "t2").is_empty());
        let trail = trail_of(&headers);
        assert_eq!(trail.len(), 2);
        assert_eq!(trail[0].inner().get("by"), Some(&text("ana")));
        assert_eq!(trail[1].inner().get("by"), Some(&text("bo")));
        assert_eq!(headers.inner().get(RETRY_EDITED_BY), Some(&text("bo")));
    }
}
