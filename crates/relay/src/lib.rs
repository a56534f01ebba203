//! The hand-off between Airlock's in-container relay and the egress proxy.
//!
//! The browser's container has no network. Chromium's proxy setting points at `127.0.0.1:3128` on
//! the container's own loopback, where `airlock-relay` listens. Copying every byte between that TCP
//! connection and the proxy's Unix socket would put a second hop (two more copies, one more
//! process to schedule) on every request. Instead the relay passes each accepted connection itself
//! to the proxy: one byte, [`HANDOFF_TAG`], with the socket attached as `SCM_RIGHTS`, on the
//! proxy's hand-off socket. The proxy then serves the browser's own socket, exactly as if the
//! browser had connected to it, under the same policy and limits.
//!
//! The receiving side trusts nothing it is given: exactly one descriptor per tag byte, and it must
//! be a connected TCP socket (not a listener, file, pipe or Unix socket). Anything else is closed
//! and returned as a [`HandoffRefusal`]. Passing a socket grants the proxy nothing the sender did
//! not already have: the proxy only reads requests from it and writes answers to it.
//!
//! This crate knows no async runtime: [`receive_stream`] is one non-blocking-friendly `recvmsg`,
//! which the proxy calls when its channel is readable, and [`relay`] is the relay's whole loop
//! (blocking), run by the `airlock-relay` binary and, on a thread, by tests and benchmarks.
//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::{Shutdown, TcpListener, TcpStream};
//! use std::os::unix::net::UnixStream;
//! use airlock_relay::{Received, receive_stream, send_stream};
//!
//! let (relay_side, proxy_side) = UnixStream::pair()?;
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! let mut browser = TcpStream::connect(listener.local_addr()?)?;
//! let (accepted, _) = listener.accept()?;
//!
//! send_stream(&relay_side, &accepted)?; // the relay hands the browser's connection over
//! drop(accepted);
//! let Received::Stream(mut served) = receive_stream(&proxy_side)? else { panic!() };
//! browser.write_all(b"ping")?;
//! let mut seen = [0_u8; 4];
//! served.read_exact(&mut seen)?; // the proxy reads the browser's own socket
//! assert_eq!(&seen, b"ping");
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use rustix::fs::FileType;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketType, sockopt,
};

/// The one byte that carries each handed-off socket.
pub const HANDOFF_TAG: u8 = b'H';

/// Room for more descriptors than the protocol allows, so a sender that attaches several is seen
/// doing so (and every one of them is closed) rather than silently truncated.
const RECEIVE_ROOM: usize = 4;

/// Why a hand-off message was refused. The descriptors it carried are already closed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HandoffRefusal {
    /// The data byte was not [`HANDOFF_TAG`].
    #[error("a hand-off message must be the byte {HANDOFF_TAG:#04x}, got {0:#04x}")]
    WrongTag(u8),
    /// The tag came with no descriptor.
    #[error("a hand-off message carried no socket")]
    NoDescriptor,
    /// The tag came with more than one descriptor (or more than fit).
    #[error("a hand-off message must carry exactly one socket, it carried more")]
    TooManyDescriptors,
    /// The descriptor was not a connected TCP socket.
    #[error("a handed-off descriptor must be a connected TCP socket, it was {0}")]
    NotTcpStream(&'static str),
}

/// Why [`relay`] stopped. It never stops otherwise.
#[derive(Debug, thiserror::Error)]
pub enum RelayStopped {
    /// The proxy closed its end of the channel.
    #[error("the egress proxy closed the hand-off channel")]
    ChannelClosed,
    /// Passing a socket failed (the proxy went away mid-send).
    #[error("the egress proxy stopped taking connections: {0}")]
    SendFailed(std::io::Error),
    /// Waiting for connections failed.
    #[error("waiting for connections failed: {0}")]
    Wait(std::io::Error),
    /// In copying mode, the proxy's socket no longer answers.
    #[error("the egress proxy's socket does not answer: {0}")]
    ProxyUnreachable(std::io::Error),
}

/// Accept connections on `listener` and hand each to the proxy over `channel`, until the proxy
/// goes away. Blocks; returns only why it stopped.
pub fn relay(listener: &TcpListener, channel: &UnixStream) -> RelayStopped {
    loop {
        match wait_for_connection(listener, channel) {
            Ok(true) => {}
            Ok(false) => return RelayStopped::ChannelClosed,
            Err(error) => return RelayStopped::Wait(error),
        }
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(error) => {
                eprintln!("airlock-relay: accept failed: {error}");
                // Out of descriptors or a connection aborted before accept: back off briefly so a
                // persistent condition does not spin the CPU.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        // The proxy's answers are small writes; they should not wait on Nagle's algorithm.
        let _ = stream.set_nodelay(true);
        if let Err(error) = send_stream(channel, &stream) {
            return RelayStopped::SendFailed(error);
        }
    }
}

/// Accept connections on `listener` and copy each, both ways, over a new connection to the
/// proxy's socket at `proxy` (`proxy.sock`), until the proxy stops answering. Blocks.
///
/// For runtimes whose sockets are not host file descriptors (gVisor's user-space kernel), where
/// [`relay`] cannot hand a socket over: the proxy then sees one more hop, but the same requests,
/// under the same policy and limits, since every byte still goes to `proxy.sock`.
pub fn relay_copying(listener: &TcpListener, proxy: &Path) -> RelayStopped {
    loop {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(error) => {
                eprintln!("airlock-relay: accept failed: {error}");
                // As in `relay`: back off so a persistent condition does not spin the CPU.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let _ = client.set_nodelay(true);
        let upstream = match UnixStream::connect(proxy) {
            Ok(upstream) => upstream,
            Err(error) => return RelayStopped::ProxyUnreachable(error),
        };
        std::thread::spawn(move || copy_both_ways(client, upstream));
    }
}

/// Copy this process's stdin to a connection to `target` on the container's loopback, and the
/// connection's bytes to stdout, until the connection ends. Blocks.
///
/// This is how the host reaches a port inside the sealed container that only the host may use
/// (agent-browser's stream server, for a task's live view): through an exec's stdio, which
/// dockerd attaches, never through a listener the host could be reached by. Only loopback
/// targets are taken.
pub fn copy_stdio(target: std::net::SocketAddr) -> std::io::Result<()> {
    if !target.ip().is_loopback() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{target} is not on the container's loopback; only loopback ports are reached"),
        ));
    }
    let connection = TcpStream::connect(target)?;
    let _ = connection.set_nodelay(true);
    let mut to_target = connection.try_clone()?;
    let upward = std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut to_target);
        let _ = to_target.shutdown(Shutdown::Write);
    });
    let copied = copy_flushing(connection, &mut std::io::stdout().lock());
    // The host closing stdin ends the upward copy; the connection's end ends this one.
    drop(upward);
    copied
}

/// Copy `from` to `to` until `from` ends, flushing each chunk as it comes: stdout is line
/// buffered, and a small message with no newline in it (a DevTools answer) would otherwise wait
/// in the buffer for the next one.
fn copy_flushing(
    mut from: impl std::io::Read,
    to: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let mut buffer = vec![0_u8; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => return to.flush(),
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        to.write_all(&buffer[..read])?;
        to.flush()?;
    }
}

/// Copy client → proxy on a second thread and proxy → client on this one; each direction's end
/// is passed on as a half-close, so both sides see the other finish.
fn copy_both_ways(client: TcpStream, proxy: UnixStream) {
    let (Ok(mut from_client), Ok(mut to_proxy)) = (client.try_clone(), proxy.try_clone()) else {
        return;
    };
    let upward = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_proxy);
        let _ = to_proxy.shutdown(Shutdown::Write);
    });
    let (mut client, mut proxy) = (client, proxy);
    let _ = std::io::copy(&mut proxy, &mut client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = upward.join();
}

/// Wait until a browser connects (`true`) or the proxy's end of the channel closes (`false`). The
/// proxy never writes to the channel, so any readiness there means it went away: the relay ends
/// then rather than at the next connection.
fn wait_for_connection(listener: &TcpListener, channel: &UnixStream) -> std::io::Result<bool> {
    use rustix::event::{PollFd, PollFlags, poll};
    loop {
        let mut watched = [
            PollFd::new(listener, PollFlags::IN),
            PollFd::new(channel, PollFlags::IN),
        ];
        match poll(&mut watched, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(error) => return Err(error.into()),
        }
        if !watched[1].revents().is_empty() {
            return Ok(false);
        }
        if !watched[0].revents().is_empty() {
            return Ok(true);
        }
    }
}

/// What one read of the hand-off channel produced.
#[derive(Debug)]
pub enum Received {
    /// A connected TCP socket to serve (in blocking mode, as sockets travel).
    Stream(TcpStream),
    /// The sender closed the channel.
    Closed,
    /// The message broke the protocol; the channel should be closed.
    Refused(HandoffRefusal),
}

/// Pass `stream` over `channel` (a connected Unix stream socket). The caller may close its copy of
/// `stream` as soon as this returns.
pub fn send_stream(channel: impl AsFd, stream: impl AsFd) -> std::io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let descriptors = [stream.as_fd()];
    if !control.push(SendAncillaryMessage::ScmRights(&descriptors)) {
        // The buffer is sized for exactly this message by `cmsg_space!`.
        return Err(std::io::Error::other(
            "the hand-off control buffer is too small",
        ));
    }
    let sent = rustix::net::sendmsg(
        channel,
        &[IoSlice::new(&[HANDOFF_TAG])],
        &mut control,
        // A vanished proxy is an error to report, not a signal that kills the relay.
        SendFlags::NOSIGNAL,
    )?;
    if sent == 1 {
        Ok(())
    } else {
        Err(std::io::ErrorKind::WriteZero.into())
    }
}

/// Read one hand-off message from `channel`. Errors are the channel's own (including
/// `WouldBlock` on a non-blocking channel with nothing to read); a message that breaks the
/// protocol is `Ok(Received::Refused(..))`.
pub fn receive_stream(channel: impl AsFd) -> std::io::Result<Received> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(RECEIVE_ROOM))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut tag = [0_u8; 1];
    // One byte per call: on a stream socket, descriptors arrive attached to the byte they were
    // sent with, so reading a byte at a time keeps each socket with its own message.
    let message = rustix::net::recvmsg(
        channel,
        &mut [IoSliceMut::new(&mut tag)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut descriptors: Vec<OwnedFd> = Vec::new();
    for part in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = part {
            descriptors.extend(fds);
        }
    }
    if message.bytes == 0 {
        return Ok(Received::Closed);
    }
    if tag[0] != HANDOFF_TAG {
        return Ok(Received::Refused(HandoffRefusal::WrongTag(tag[0])));
    }
    if message.flags.contains(ReturnFlags::CTRUNC) || descriptors.len() > 1 {
        return Ok(Received::Refused(HandoffRefusal::TooManyDescriptors));
    }
    let Some(descriptor) = descriptors.pop() else {
        return Ok(Received::Refused(HandoffRefusal::NoDescriptor));
    };
    Ok(match check_connected_tcp(&descriptor) {
        Ok(()) => Received::Stream(TcpStream::from(descriptor)),
        Err(refusal) => Received::Refused(refusal),
    })
}

/// A descriptor is served only if it is a connected TCP socket: a file, pipe, Unix socket or
/// listener would make the proxy read and write something that is not a browser's connection.
fn check_connected_tcp(descriptor: &OwnedFd) -> Result<(), HandoffRefusal> {
    let unreadable = |_| HandoffRefusal::NotTcpStream("unreadable");
    let stat = rustix::fs::fstat(descriptor).map_err(unreadable)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Socket {
        return Err(HandoffRefusal::NotTcpStream("not a socket"));
    }
    if sockopt::socket_type(descriptor).map_err(unreadable)? != SocketType::STREAM {
        return Err(HandoffRefusal::NotTcpStream("not a stream socket"));
    }
    let domain = sockopt::socket_domain(descriptor).map_err(unreadable)?;
    if domain != AddressFamily::INET && domain != AddressFamily::INET6 {
        return Err(HandoffRefusal::NotTcpStream("not an internet socket"));
    }
    if sockopt::socket_acceptconn(descriptor).map_err(unreadable)? {
        return Err(HandoffRefusal::NotTcpStream("a listening socket"));
    }
    match rustix::net::getpeername(descriptor) {
        Ok(Some(_)) => Ok(()),
        Ok(None) | Err(_) => Err(HandoffRefusal::NotTcpStream("not connected")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::os::unix::net::UnixStream;

    #[test]
    fn stdio_reaches_only_the_containers_loopback() {
        // Refused before any connection is tried (TEST-NET-1: nothing is sent anywhere).
        let refused = copy_stdio("192.0.2.1:9223".parse().unwrap()).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
        assert!(refused.to_string().contains("loopback"), "{refused}");
    }

    fn connected_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    #[test]
    fn a_handed_off_socket_is_the_same_connection() {
        let (sender, receiver) = UnixStream::pair().unwrap();
        let (mut client, server) = connected_pair();
        send_stream(&sender, &server).unwrap();
        drop(server); // the receiver's copy is now the only one
        let Received::Stream(mut handed) = receive_stream(&receiver).unwrap() else {
            panic!("expected a stream");
        };
        client.write_all(b"ping").unwrap();
        let mut got = [0_u8; 4];
        handed.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        handed.write_all(b"pong").unwrap();
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"pong");
    }

    #[test]
    fn messages_keep_their_own_sockets_in_order() {
        let (sender, receiver) = UnixStream::pair().unwrap();
        let pairs: Vec<_> = (0..3).map(|_| connected_pair()).collect();
        for (_, server) in &pairs {
            send_stream(&sender, server).unwrap();
        }
        for (client, _) in &pairs {
            let Received::Stream(handed) = receive_stream(&receiver).unwrap() else {
                panic!("expected a stream");
            };
            assert_eq!(handed.peer_addr().unwrap(), client.local_addr().unwrap());
        }
        drop(sender);
        assert!(matches!(
            receive_stream(&receiver).unwrap(),
            Received::Closed
        ));
    }

    /// Send `byte` with `descriptors` attached, bypassing `send_stream`'s rules.
    fn send_raw(channel: &UnixStream, byte: u8, descriptors: &[std::os::fd::BorrowedFd<'_>]) {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(8))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !descriptors.is_empty() {
            assert!(control.push(SendAncillaryMessage::ScmRights(descriptors)));
        }
        rustix::net::sendmsg(
            channel,
            &[IoSlice::new(&[byte])],
            &mut control,
            SendFlags::empty(),
        )
        .unwrap();
    }

    fn refusal_for(byte: u8, descriptors: &[std::os::fd::BorrowedFd<'_>]) -> HandoffRefusal {
        let (sender, receiver) = UnixStream::pair().unwrap();
        send_raw(&sender, byte, descriptors);
        match receive_stream(&receiver).unwrap() {
            Received::Refused(refusal) => refusal,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn anything_but_one_connected_tcp_socket_is_refused() {
        let (_client, server) = connected_pair();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let unconnected =
            rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (unix, _unix_peer) = UnixStream::pair().unwrap();
        let file = tempfile_like();
        let (_other_client, other_server) = connected_pair();

        assert_eq!(
            refusal_for(b'X', &[server.as_fd()]),
            HandoffRefusal::WrongTag(b'X')
        );
        assert_eq!(refusal_for(HANDOFF_TAG, &[]), HandoffRefusal::NoDescriptor);
        assert_eq!(
            refusal_for(HANDOFF_TAG, &[server.as_fd(), other_server.as_fd()]),
            HandoffRefusal::TooManyDescriptors
        );
        let many: Vec<_> = std::iter::repeat_n(server.as_fd(), 6).collect();
        assert_eq!(
            refusal_for(HANDOFF_TAG, &many),
            HandoffRefusal::TooManyDescriptors
        );
        for (descriptor, why) in [
            (listener.as_fd(), "a listening socket"),
            (unconnected.as_fd(), "not connected"),
            (udp.as_fd(), "not a stream socket"),
            (unix.as_fd(), "not an internet socket"),
            (file.as_fd(), "not a socket"),
        ] {
            assert_eq!(
                refusal_for(HANDOFF_TAG, &[descriptor]),
                HandoffRefusal::NotTcpStream(why)
            );
        }
    }

    #[test]
    fn refused_descriptors_are_closed_on_the_receiving_side() {
        let (sender, receiver) = UnixStream::pair().unwrap();
        let (mut client, server) = connected_pair();
        // Two sockets in one message: both must be closed by the receiver.
        let (_other_client, other_server) = connected_pair();
        send_raw(
            &sender,
            HANDOFF_TAG,
            &[server.as_fd(), other_server.as_fd()],
        );
        drop((server, other_server));
        assert!(matches!(
            receive_stream(&receiver).unwrap(),
            Received::Refused(HandoffRefusal::TooManyDescriptors)
        ));
        // With every copy closed, the client sees the connection end.
        let mut byte = [0_u8; 1];
        assert_eq!(client.read(&mut byte).unwrap(), 0);
    }

    fn tempfile_like() -> std::fs::File {
        std::fs::File::open("/proc/self/status").unwrap()
    }

    /// A small message with no newline reaches a line-buffered stdout before the next one comes
    /// (a DevTools answer would otherwise wait in the buffer).
    #[test]
    fn each_chunk_is_flushed_through_a_line_buffer_as_it_comes() {
        use std::cell::RefCell;
        use std::io::{LineWriter, Read, Write};
        use std::rc::Rc;

        struct Shared(Rc<RefCell<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.borrow_mut().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        /// Gives `{"id":1}`, then, before it ends, what had come out by then.
        struct Answers {
            out: Rc<RefCell<Vec<u8>>>,
            seen: Option<Vec<u8>>,
            given: bool,
        }
        impl Read for Answers {
            fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
                if self.given {
                    self.seen = Some(self.out.borrow().clone());
                    return Ok(0);
                }
                self.given = true;
                buffer[..8].copy_from_slice(br#"{"id":1}"#);
                Ok(8)
            }
        }
        let out = Rc::new(RefCell::new(Vec::new()));
        let mut answers = Answers {
            out: Rc::clone(&out),
            seen: None,
            given: false,
        };
        let mut stdout = LineWriter::new(Shared(Rc::clone(&out)));
        super::copy_flushing(&mut answers, &mut stdout).unwrap();
        assert_eq!(answers.seen.as_deref(), Some(&br#"{"id":1}"#[..]));
    }
}
