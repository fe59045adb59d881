//! The lists the native side owns and the TypeScript layer and the docs
//! repeat: why a message parks, what a handler's failure is reported as, the
//! native error codes, why the outbox parks a row. `cargo test` writes them to
//! `lib/contract.ts` and fails when that file differs, so the TypeScript
//! types and the docs' checks (`__test__/docs.test.ts`) read one list.

#[cfg(test)]
mod tests {
    use crate::error::ErrorKind;
    use crate::retry::{ParkReason, Thrown};

    /// Where the lists are kept for TypeScript.
    const CONTRACT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/lib/contract.ts");

    /// One `as const` list and its type, with a doc comment each.
    fn list(doc: &str, name: &str, type_doc: &str, type_name: &str, items: &[&str]) -> String {
        let items: Vec<String> = items.iter().map(|i| format!("'{i}'")).collect();
        format!(
            "/** {doc} */\nexport const {name} = [{}] as const;\n\n/** {type_doc} */\nexport type {type_name} = (typeof {name})[number];\n",
            items.join(", ")
        )
    }

    /// The file as this code writes it.
    fn contract() -> String {
        let reasons: Vec<&str> = ParkReason::ALL.iter().map(ParkReason::as_str).collect();
        let kinds: Vec<&str> = Thrown::ALL.iter().map(|t| t.as_str()).collect();
        let codes: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        [
            "// Written by `cargo test` (src/binding/contract.rs) from the native side's own lists: do not edit.\n\
             // After a change to one of them, `RABBIT_RETRY_WRITE_FIXTURES=1 cargo test` writes it again.\n"
                .to_owned(),
            list(
                "Why a copy is parked: its `retry-reason` (src/retry/route.rs, `ParkReason`).",
                "PARK_REASONS",
                "The `retry-reason` of a parked copy.",
                "ParkReason",
                &reasons,
            ),
            list(
                "What a handler's failure is reported as to the native verdict (src/retry/verdict.rs, `Thrown`).",
                "FAILURE_KINDS",
                "What a handler threw, as its failure's report names it.",
                "FailureKind",
                &kinds,
            ),
            list(
                "The codes of the native layer's errors (src/error.rs, `ErrorKind`).",
                "NATIVE_ERROR_CODES",
                "A code the native layer gives an error.",
                "NativeErrorCode",
                &codes,
            ),
            list(
                "Why the outbox's relay parks a row: its `park_reason` (src/outbox/outcome.rs).",
                "OUTBOX_PARK_REASONS",
                "Why the relay parked a row.",
                "OutboxParkReason",
                &crate::outbox::PARK_REASONS,
            ),
        ]
        .join("\n")
    }

    #[test]
    fn the_typescript_lists_are_the_native_ones() {
        let want = contract();
        if std::env::var_os("RABBIT_RETRY_WRITE_FIXTURES").is_some() {
            std::fs::write(CONTRACT, &want).unwrap();
        }
        let have = std::fs::read_to_string(CONTRACT).unwrap_or_default();
        assert!(
            have == want,
            "{CONTRACT} differs from the native lists: run `RABBIT_RETRY_WRITE_FIXTURES=1 cargo test`"
        );
    }

    /// A reason's place in `ParkReason::ALL`; a new reason does not compile
    /// until it has an arm here, and the test below until it is listed.
    fn place(r: ParkReason) -> usize {
        use ParkReason::*;
        match r {
            Exhausted => 0,
            NonRetryable => 1,
            NoHandler => 2,
            DeliveryLimit => 3,
            ConsumerTimeout => 4,
            Undecodable => 5,
            HeadersTooLarge => 6,
            ReplyRefused => 7,
            TableRefused => 8,
            InboxRefused => 9,
        }
    }

    #[test]
    fn every_reason_is_listed_in_its_place() {
        let places: Vec<usize> = ParkReason::ALL.into_iter().map(place).collect();
        assert_eq!(places, (0..ParkReason::ALL.len()).collect::<Vec<_>>());
    }

    #[test]
    fn every_reason_and_kind_is_listed_once() {
        let mut reasons: Vec<&str> = ParkReason::ALL.iter().map(ParkReason::as_str).collect();
        reasons.sort_unstable();
        reasons.dedup();
        assert_eq!(reasons.len(), ParkReason::ALL.len());
        // A kind the verdict parks at once has a reason of its own, but for
        // `non-retryable` and `retryable`, which every policy decides.
        for kind in ["no-handler", "reply-refused", "inbox-refused"] {
            assert!(reasons.contains(&kind), "{kind}");
        }
    }
}
