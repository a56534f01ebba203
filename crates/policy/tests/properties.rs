//! Properties of both policies over generated input.

// Tests stop at the first surprise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use airlock_policy::{Decision, EgressPolicy, allowed_commands, check_command, refused_flags};
use proptest::prelude::*;

fn refused_flag() -> impl Strategy<Value = &'static str> {
    let flags: Vec<&'static str> = refused_flags().collect();
    proptest::sample::select(flags)
}

proptest! {
    #[test]
    fn no_unlisted_command_is_ever_allowed(name in "[a-z-]{1,14}", rest in proptest::collection::vec("[a-z@0-9]{0,8}", 0..4)) {
        prop_assume!(!allowed_commands().any(|allowed| allowed == name));
        let mut args = vec![name];
        args.extend(rest);
        prop_assert!(check_command(&args).is_err());
    }

    #[test]
    fn a_refused_flag_anywhere_refuses(
        position in 0_usize..4,
        flag in refused_flag(),
        value in "[a-z:/.=]{0,12}",
        inline in any::<bool>(),
    ) {
        let mut args: Vec<String> = ["open", "https://example.com", "--json"].map(String::from).to_vec();
        let position = position.min(args.len());
        if inline {
            args.insert(position, format!("{flag}={value}"));
        } else {
            args.insert(position, flag.to_owned());
            args.insert(position + 1, value);
        }
        prop_assert!(check_command(&args).is_err(), "{:?}", args);
    }

    #[test]
    fn non_http_schemes_never_pass(
        scheme in "[a-zA-Z][a-zA-Z0-9+.-]{0,10}",
        lead in "[\\x00-\\x20]{0,3}",
        tab_at in 0_usize..12,
        rest in "[a-z/:.]{0,16}",
    ) {
        let lower = scheme.to_ascii_lowercase();
        prop_assume!(lower != "http" && lower != "https");
        let mut url = format!("{scheme}:{rest}");
        url.insert(tab_at.min(url.len()), '\t');
        let url = format!("{lead}{url}");
        prop_assert!(matches!(EgressPolicy::default().decide_url(&url), Decision::Refuse(_)), "{:?}", url);
        let args = vec!["open".to_owned(), url.clone()];
        prop_assert!(check_command(&args).is_err(), "{:?}", url);
    }

    #[test]
    fn decisions_never_panic(input in "\\PC{0,60}") {
        let policy = EgressPolicy::default();
        let _ = policy.decide_url(&input);
        let _ = policy.decide_authority(&input);
        let _ = check_command(std::slice::from_ref(&input));
    }
}
