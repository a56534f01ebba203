//! The watch's state machine, message by message.

use super::*;

fn sent(actions: &[WatchAction]) -> Vec<Value> {
    actions
        .iter()
        .filter_map(|action| match action {
            WatchAction::Send(text) => Some(serde_json::from_str(text).unwrap()),
            _ => None,
        })
        .collect()
}

fn id_of(text: &str) -> i64 {
    serde_json::from_str::<Value>(text).unwrap()["id"]
        .as_i64()
        .unwrap()
}

/// A watch attached to target `T2` with session `OURS`; returns the screencast's start.
fn watching(watch: &mut CdpWatch) -> Value {
    let list = watch.begin().unwrap();
    let listed = format!(
        r#"{{"id":{},"result":{{"targetInfos":[{{"targetId":"T1","type":"page","attached":true}},{{"targetId":"T2","type":"page","attached":true}},{{"targetId":"T3","type":"page","attached":false}},{{"targetId":"W","type":"service_worker","attached":true}}]}}}}"#,
        id_of(&list)
    );
    let attach = sent(&watch.read(&listed).unwrap());
    assert_eq!(attach[0]["method"], "Target.attachToTarget");
    assert_eq!(
        attach[0]["params"]["targetId"], "T2",
        "the last attached page"
    );
    let event = r#"{"method":"Target.attachedToTarget","params":{"sessionId":"OURS","targetInfo":{"targetId":"T2","type":"page"},"waitingForDebugger":false}}"#;
    assert_eq!(watch.read(event), Some(Vec::new()), "held, not passed on");
    let answer = format!(
        r#"{{"id":{},"result":{{"sessionId":"OURS"}}}}"#,
        attach[0]["id"]
    );
    let start = sent(&watch.read(&answer).unwrap());
    assert_eq!(start.len(), 2, "our own attach event is dropped: {start:?}");
    assert_eq!(start[1]["method"], "Page.captureScreenshot");
    assert_eq!(start[1]["sessionId"], "OURS");
    assert!(start[1]["id"].as_i64().unwrap() >= SERVER_ID_BASE);
    start[0].clone()
}

/// The starting screenshot's id, from a watch that has just started.
fn still_id(watch: &CdpWatch) -> i64 {
    watch.still.unwrap()
}

#[test]
fn a_page_at_rest_is_shown_by_the_starting_screenshot_unless_a_frame_came_first() {
    let mut watch = CdpWatch::new();
    watching(&mut watch);
    let still = still_id(&watch);
    let answer = format!(r#"{{"id":{still},"result":{{"data":"/9j/BB=="}},"sessionId":"OURS"}}"#);
    assert_eq!(
        watch.read(&answer),
        Some(vec![WatchAction::Still("/9j/BB==".into())])
    );

    let mut overtaken = CdpWatch::new();
    watching(&mut overtaken);
    let still = still_id(&overtaken);
    let frame = r#"{"method":"Page.screencastFrame","params":{"data":"/9j/AA==","sessionId":1},"sessionId":"OURS"}"#;
    assert!(matches!(
        overtaken.read(frame).unwrap().as_slice(),
        [WatchAction::Frame { .. }]
    ));
    let late = format!(r#"{{"id":{still},"result":{{"data":"/9j/BB=="}},"sessionId":"OURS"}}"#);
    assert_eq!(
        overtaken.read(&late),
        Some(Vec::new()),
        "older than the frame"
    );
}

#[test]
fn the_watch_attaches_to_the_page_and_screencasts_with_ids_of_its_own() {
    let mut watch = CdpWatch::new();
    let start = watching(&mut watch);
    assert_eq!(start["method"], "Page.startScreencast");
    assert_eq!(start["sessionId"], "OURS");
    assert!(start["id"].as_i64().unwrap() >= SERVER_ID_BASE);
    let frame = r#"{"method":"Page.screencastFrame","params":{"data":"/9j/AA==","metadata":{},"sessionId":7},"sessionId":"OURS"}"#;
    let Some(actions) = watch.read(frame) else {
        panic!("a frame of the watch went to the client")
    };
    let [WatchAction::Frame { jpeg_base64, ack }] = actions.as_slice() else {
        panic!("{actions:?}")
    };
    assert_eq!(jpeg_base64, "/9j/AA==");
    let ack: Value = serde_json::from_str(ack).unwrap();
    assert_eq!(ack["method"], "Page.screencastFrameAck");
    assert_eq!(ack["params"]["sessionId"], 7);
    assert_eq!(ack["sessionId"], "OURS");
    // The answers to its own commands are its own.
    let answer = format!(r#"{{"id":{},"result":{{}},"sessionId":"OURS"}}"#, ack["id"]);
    assert_eq!(watch.read(&answer), Some(Vec::new()));
}

#[test]
fn the_clients_messages_pass_untouched() {
    let mut watch = CdpWatch::new();
    watching(&mut watch);
    for text in [
        r#"{"id":1,"result":{}}"#,
        r#"{"id":1999999999,"result":{}}"#,
        r#"{"id":3,"result":{},"sessionId":"CLIENT"}"#,
        r#"{"method":"Page.loadEventFired","params":{"timestamp":1},"sessionId":"CLIENT"}"#,
        r#"{"method":"Page.screencastFrame","params":{"data":"x","sessionId":1},"sessionId":"CLIENT"}"#,
        r#"{"method":"Target.targetCreated","params":{"targetInfo":{"targetId":"T9"}}}"#,
        r#"{"method":"Target.attachedToTarget","params":{"sessionId":"NEW","targetInfo":{"targetId":"T9"}}}"#,
        r#"{"method":"Runtime.consoleAPICalled","params":{"args":[{"value":"\"sessionId\":\"OURS"}]},"sessionId":"CLIENT"}"#,
    ] {
        assert_eq!(watch.read(text), None, "{text}");
    }
    let idle = &mut CdpWatch::new();
    assert_eq!(
        idle.read(r#"{"method":"X","params":{},"sessionId":"OURS"}"#),
        None
    );
}

#[test]
fn a_clients_attach_to_the_same_page_meanwhile_is_passed_on_after_the_answer() {
    let mut watch = CdpWatch::new();
    let list = watch.begin().unwrap();
    let listed = format!(
        r#"{{"id":{},"result":{{"targetInfos":[{{"targetId":"T1","type":"page","attached":false}}]}}}}"#,
        id_of(&list)
    );
    let attach = sent(&watch.read(&listed).unwrap());
    let clients = r#"{"method":"Target.attachedToTarget","params":{"sessionId":"THEIRS","targetInfo":{"targetId":"T1","type":"page"}}}"#;
    let ours = r#"{"method":"Target.attachedToTarget","params":{"sessionId":"OURS","targetInfo":{"targetId":"T1","type":"page"}}}"#;
    assert_eq!(watch.read(clients), Some(Vec::new()));
    assert_eq!(watch.read(ours), Some(Vec::new()));
    let answer = format!(
        r#"{{"id":{},"result":{{"sessionId":"OURS"}}}}"#,
        attach[0]["id"]
    );
    let actions = watch.read(&answer).unwrap();
    assert_eq!(actions[0], WatchAction::ToClient(clients.to_owned()));
    // Then the screencast's start and the starting screenshot.
    assert_eq!(actions.len(), 3, "{actions:?}");
}

#[test]
fn ending_detaches_and_the_detach_is_not_the_clients_to_see() {
    let mut watch = CdpWatch::new();
    watching(&mut watch);
    let detach: Value = serde_json::from_str(&watch.end().unwrap()).unwrap();
    assert_eq!(detach["method"], "Target.detachFromTarget");
    assert_eq!(detach["params"]["sessionId"], "OURS");
    assert!(!watch.active());
    assert_eq!(watch.end(), None, "ended once");
    let late_frame = r#"{"method":"Page.screencastFrame","params":{"data":"x","sessionId":2},"sessionId":"OURS"}"#;
    assert_eq!(watch.read(late_frame), Some(Vec::new()));
    let detached =
        r#"{"method":"Target.detachedFromTarget","params":{"sessionId":"OURS","targetId":"T2"}}"#;
    assert_eq!(watch.read(detached), Some(Vec::new()));
    assert!(watch.retired.is_empty());
}

#[test]
fn a_watched_page_that_closes_asks_for_another_look() {
    let mut watch = CdpWatch::new();
    watching(&mut watch);
    let detached =
        r#"{"method":"Target.detachedFromTarget","params":{"sessionId":"OURS","targetId":"T2"}}"#;
    assert_eq!(watch.read(detached), Some(vec![WatchAction::NoPage]));
    assert!(!watch.active());
    assert!(watch.begin().is_some(), "it can look again");
}

#[test]
fn no_page_and_a_failed_attach_say_so() {
    let mut watch = CdpWatch::new();
    let list = watch.begin().unwrap();
    let none = format!(
        r#"{{"id":{},"result":{{"targetInfos":[{{"targetId":"B","type":"browser"}}]}}}}"#,
        id_of(&list)
    );
    assert_eq!(watch.read(&none), Some(vec![WatchAction::NoPage]));
    let list = watch.begin().unwrap();
    let one = format!(
        r#"{{"id":{},"result":{{"targetInfos":[{{"targetId":"T","type":"page"}}]}}}}"#,
        id_of(&list)
    );
    let attach = sent(&watch.read(&one).unwrap());
    let failed = format!(
        r#"{{"id":{},"error":{{"code":-32602,"message":"No target with given id found"}}}}"#,
        attach[0]["id"]
    );
    assert_eq!(watch.read(&failed), Some(vec![WatchAction::NoPage]));
    assert!(!watch.active());
}

#[test]
fn a_watch_ended_during_its_attach_leaves_the_session_it_gets() {
    let mut watch = CdpWatch::new();
    let list = watch.begin().unwrap();
    let one = format!(
        r#"{{"id":{},"result":{{"targetInfos":[{{"targetId":"T","type":"page"}}]}}}}"#,
        id_of(&list)
    );
    let attach = sent(&watch.read(&one).unwrap());
    assert_eq!(watch.end(), None);
    let answer = format!(
        r#"{{"id":{},"result":{{"sessionId":"LATE"}}}}"#,
        attach[0]["id"]
    );
    let detach = sent(&watch.read(&answer).unwrap());
    assert_eq!(detach[0]["method"], "Target.detachFromTarget");
    assert_eq!(detach[0]["params"]["sessionId"], "LATE");
    assert!(!watch.active());
}

#[test]
fn a_frame_too_large_to_keep_is_acknowledged_and_dropped() {
    let mut watch = CdpWatch::new();
    watching(&mut watch);
    let data = "A".repeat(MAX_FRAME_BASE64 + 4);
    let frame = format!(
        r#"{{"method":"Page.screencastFrame","params":{{"data":"{data}","sessionId":3}},"sessionId":"OURS"}}"#
    );
    let actions = watch.read(&frame).unwrap();
    assert_eq!(sent(&actions)[0]["method"], "Page.screencastFrameAck");
    assert_eq!(actions.len(), 1);
}

#[test]
fn ids_stay_in_the_servers_range() {
    let mut watch = CdpWatch::new();
    watch.next_id = i64::from(i32::MAX);
    assert_eq!(watch.take_id(), i64::from(i32::MAX));
    assert_eq!(watch.take_id(), SERVER_ID_BASE);
}
