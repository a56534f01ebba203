//! A DNS responder on 127.0.0.1 (UDP) for lab names, so tests never need the public DNS.

use std::collections::HashMap;
use std::net::{Ipv4Addr, UdpSocket};
use std::sync::Mutex;

/// A DNS responder on 127.0.0.1 (UDP) for lab names. Each name has a list of IPv4 answers used in
/// turn, one per A query (so a name can alternate). AAAA queries get no records; unknown names
/// NXDOMAIN. Answers have TTL 0, so nothing is cached.
pub fn dns(names: HashMap<&'static str, Vec<Ipv4Addr>>) -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let turns: Mutex<HashMap<String, usize>> = Mutex::default();
    std::thread::spawn(move || {
        let mut buf = [0_u8; 512];
        loop {
            let Ok((len, peer)) = socket.recv_from(&mut buf) else {
                return;
            };
            if let Some(answer) = respond(&buf[..len], &names, &turns) {
                let _ = socket.send_to(&answer, peer);
            }
        }
    });
    port
}

fn respond(
    query: &[u8],
    names: &HashMap<&'static str, Vec<Ipv4Addr>>,
    turns: &Mutex<HashMap<String, usize>>,
) -> Option<Vec<u8>> {
    if query.len() < 12 {
        return None;
    }
    // The question: labels, then type and class.
    let mut labels = Vec::new();
    let mut at = 12;
    loop {
        let len = usize::from(*query.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + len)?).to_ascii_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*query.get(at)?, *query.get(at + 1)?]);
    let question_end = at + 4;
    let name = labels.join(".");
    let mut answer = query[..question_end].to_vec();
    answer[2] = 0x81 | (query[2] & 0x01); // response, recursion desired echoed
    answer[3] = 0x80; // recursion available, NOERROR
    answer[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0]);
    let Some(addresses) = names.get(name.as_str()) else {
        answer[3] = 0x83; // NXDOMAIN
        return Some(answer);
    };
    if qtype == 1 {
        let mut turns = turns.lock().unwrap();
        let turn = turns.entry(name).or_default();
        let ip = addresses[*turn % addresses.len()];
        *turn += 1;
        answer[7] = 1; // one answer
        answer.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4]);
        answer.extend_from_slice(&ip.octets());
    }
    Some(answer)
}
