//! Airlock's in-container command runner and the frames it speaks.
//!
//! Every agent-browser command used to be its own `docker exec`: dockerd, containerd and runc set
//! up a new process in the container's namespaces, cgroup and seccomp profile each time, which
//! took several times longer than the command itself. `airlock-runner` is started once per
//! session by one long-lived exec; the host writes [`Request`] frames to its stdin and reads one
//! [`Response`] frame per request from its stdout. The runner starts each command itself (never
//! through a shell), under `timeout(1)` as before, so a command costs a process spawn.
//!
//! The runner grants nothing an exec did not: it runs as the container's user, in the container,
//! with the container's environment, only what the host asks. The host trusts nothing it reads
//! back: frames are bounded by [`MAX_FRAME_BYTES`] and decoded strictly.
//!
//! A frame is a big-endian `u32` length and that many bytes:
//!
//! ```text
//! request:  id u64 | timeout_secs u32 | max_output u64 | argc u32 | (len u32, arg)* | has_stdin u8 | (len u32, stdin)
//! response: id u64 | exit_code i64 | dropped u64 | (len u32, stdout) | (len u32, stderr)
//! ```
//!
//! ```
//! use airlock_runner::{Request, frame_body};
//!
//! let request = Request { id: 7, timeout_secs: 30, max_output: 1024, argv: vec!["true".into()], stdin: None };
//! let frame = request.encode();
//! let body = frame_body(&frame).unwrap().unwrap();
//! assert_eq!(Request::decode(body).unwrap(), request);
//! ```

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The largest frame either side accepts. A full-page screenshot read back as base64 is tens of
/// megabytes; past this the frame is refused instead of growing without bound.
pub const MAX_FRAME_BYTES: usize = 256 * 1024 * 1024;
/// Exit code of a command that `timeout(1)` stopped.
pub const TIMED_OUT_EXIT: i64 = 124;
/// Exit code when the command could not be started at all (as a shell reports it).
pub const NOT_STARTED_EXIT: i64 = 127;
/// Seconds between `timeout(1)`'s TERM and its KILL.
const KILL_AFTER: &str = "--kill-after=2";

/// One command for the runner to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Chosen by the host; the response carries it back.
    pub id: u64,
    /// Seconds before `timeout(1)` stops the command (at least 1).
    pub timeout_secs: u32,
    /// Bytes of stdout and stderr together to keep; the rest is counted, not kept.
    pub max_output: u64,
    /// The program and its arguments (no shell).
    pub argv: Vec<String>,
    /// Bytes for the command's stdin, which is closed after them; `None` gives it no stdin.
    pub stdin: Option<Vec<u8>>,
}

/// How one command ended and what it printed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Response {
    /// The request's id.
    pub id: u64,
    /// The exit code; [`TIMED_OUT_EXIT`] when stopped, 128 + signal when killed otherwise.
    pub exit_code: i64,
    /// Bytes printed past `max_output`.
    pub dropped: u64,
    /// Standard output, up to the cap.
    pub stdout: Vec<u8>,
    /// Standard error, up to the cap.
    pub stderr: Vec<u8>,
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// The length prefix is over the limit ([`MAX_FRAME_BYTES`], or less where the reader knows
    /// what it asked for).
    #[error(
        "a frame of {0} bytes is over the limit for what was asked (at most {MAX_FRAME_BYTES} bytes); ask for less output at once"
    )]
    TooLarge(usize),
    /// The body ended inside a field.
    #[error("the frame ended inside its {0} field; the peer speaks another version of the runner")]
    Truncated(&'static str),
    /// Bytes were left after the last field.
    #[error(
        "the frame has {0} bytes after its last field; the peer speaks another version of the runner"
    )]
    Trailing(usize),
    /// An argument was not UTF-8.
    #[error("argument {0} is not UTF-8; pass arguments as text")]
    NotText(usize),
    /// The request named no program.
    #[error("the request names no program; send at least one argument")]
    NoProgram,
}

/// The body of the first whole frame in `buffer`: `Ok(None)` until all of it has arrived.
pub fn frame_body(buffer: &[u8]) -> Result<Option<&[u8]>, FrameError> {
    frame_body_within(buffer, MAX_FRAME_BYTES)
}

/// Fields of a response body around its output: id, exit code, dropped count, and the two
/// output lengths.
pub const RESPONSE_OVERHEAD: usize = 8 + 8 + 8 + 4 + 4;

/// The most a response to a request for `max_output` bytes can take: its output (stdout and
/// stderr share the cap) and its fields. A reader of an untrusted runner holds it to this.
pub fn response_limit(max_output: u64) -> usize {
    usize::try_from(max_output)
        .unwrap_or(usize::MAX)
        .saturating_add(RESPONSE_OVERHEAD)
        .min(MAX_FRAME_BYTES)
}

/// [`frame_body`] with a lower limit: a length prefix over `limit` is refused as soon as it has
/// arrived, before anything of the body is buffered.
pub fn frame_body_within(buffer: &[u8], limit: usize) -> Result<Option<&[u8]>, FrameError> {
    let Some(prefix) = buffer.first_chunk::<4>() else {
        return Ok(None);
    };
    let length = u32::from_be_bytes(*prefix) as usize;
    if length > limit.min(MAX_FRAME_BYTES) {
        return Err(FrameError::TooLarge(length));
    }
    Ok(buffer.get(4..4 + length))
}

/// Appends fields to a frame under construction.
struct Writer(Vec<u8>);

impl Writer {
    fn new() -> Self {
        // The length prefix, filled in by `finish`.
        Self(vec![0; 4])
    }
    fn u64(&mut self, value: u64) {
        self.0.extend_from_slice(&value.to_be_bytes());
    }
    fn u32(&mut self, value: u32) {
        self.0.extend_from_slice(&value.to_be_bytes());
    }
    fn bytes(&mut self, value: &[u8]) {
        // Lengths past u32 cannot occur: frames are capped far below 4 GiB by MAX_FRAME_BYTES.
        self.u32(u32::try_from(value.len()).unwrap_or(u32::MAX));
        self.0.extend_from_slice(value);
    }
    fn finish(mut self) -> Vec<u8> {
        let length = u32::try_from(self.0.len() - 4).unwrap_or(u32::MAX);
        self.0[..4].copy_from_slice(&length.to_be_bytes());
        self.0
    }
}

/// Takes fields off the front of a frame body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize, field: &'static str) -> Result<&'a [u8], FrameError> {
        if self.0.len() < count {
            return Err(FrameError::Truncated(field));
        }
        let (head, rest) = self.0.split_at(count);
        self.0 = rest;
        Ok(head)
    }
    fn u64(&mut self, field: &'static str) -> Result<u64, FrameError> {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(self.take(8, field)?);
        Ok(u64::from_be_bytes(bytes))
    }
    fn u32(&mut self, field: &'static str) -> Result<u32, FrameError> {
        let mut bytes = [0; 4];
        bytes.copy_from_slice(self.take(4, field)?);
        Ok(u32::from_be_bytes(bytes))
    }
    fn bytes(&mut self, field: &'static str) -> Result<&'a [u8], FrameError> {
        let length = self.u32(field)? as usize;
        self.take(length, field)
    }
    fn end(self) -> Result<(), FrameError> {
        match self.0.len() {
            0 => Ok(()),
            left => Err(FrameError::Trailing(left)),
        }
    }
}

impl Request {
    /// The whole frame, length prefix included.
    pub fn encode(&self) -> Vec<u8> {
        let mut frame = Writer::new();
        frame.u64(self.id);
        frame.u32(self.timeout_secs);
        frame.u64(self.max_output);
        frame.u32(u32::try_from(self.argv.len()).unwrap_or(u32::MAX));
        for arg in &self.argv {
            frame.bytes(arg.as_bytes());
        }
        frame.0.push(u8::from(self.stdin.is_some()));
        frame.bytes(self.stdin.as_deref().unwrap_or_default());
        frame.finish()
    }

    /// A request from a frame body (see [`frame_body`]).
    pub fn decode(body: &[u8]) -> Result<Self, FrameError> {
        let mut reader = Reader(body);
        let id = reader.u64("id")?;
        let timeout_secs = reader.u32("timeout")?;
        let max_output = reader.u64("max_output")?;
        let count = reader.u32("argc")? as usize;
        // Each argument takes at least its 4-byte length, so a huge argc cannot allocate much.
        let mut argv = Vec::with_capacity(count.min(body.len() / 4));
        for index in 0..count {
            let arg = reader.bytes("argv")?;
            let text = std::str::from_utf8(arg).map_err(|_| FrameError::NotText(index))?;
            argv.push(text.to_owned());
        }
        if argv.is_empty() {
            return Err(FrameError::NoProgram);
        }
        let has_stdin = reader.take(1, "has_stdin")?[0] != 0;
        let stdin = reader.bytes("stdin")?;
        reader.end()?;
        Ok(Self {
            id,
            timeout_secs,
            max_output,
            argv,
            stdin: has_stdin.then(|| stdin.to_vec()),
        })
    }
}

impl Response {
    /// The whole frame, length prefix included.
    pub fn encode(&self) -> Vec<u8> {
        let mut frame = Writer::new();
        frame.u64(self.id);
        frame.0.extend_from_slice(&self.exit_code.to_be_bytes());
        frame.u64(self.dropped);
        frame.bytes(&self.stdout);
        frame.bytes(&self.stderr);
        frame.finish()
    }

    /// A response from a frame body (see [`frame_body`]).
    pub fn decode(body: &[u8]) -> Result<Self, FrameError> {
        let mut reader = Reader(body);
        let id = reader.u64("id")?;
        let mut exit = [0; 8];
        exit.copy_from_slice(reader.take(8, "exit_code")?);
        let dropped = reader.u64("dropped")?;
        let stdout = reader.bytes("stdout")?.to_vec();
        let stderr = reader.bytes("stderr")?.to_vec();
        reader.end()?;
        Ok(Self {
            id,
            exit_code: i64::from_be_bytes(exit),
            dropped,
            stdout,
            stderr,
        })
    }
}

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Reading requests failed.
    #[error("reading requests failed: {0}")]
    Read(std::io::Error),
    /// A request could not be decoded.
    #[error("a request could not be read: {0}")]
    Frame(#[from] FrameError),
}

/// Serve requests from `input` until it ends, each command on a thread of its own, writing one
/// response frame per request to `output` (whole frames, never interleaved). Returns once the
/// input has ended and every command started has answered.
pub fn serve(mut input: impl Read, output: impl Write + Send + 'static) -> Result<(), ServeError> {
    let output = Arc::new(Mutex::new(output));
    let mut running = Vec::new();
    let result = loop {
        let request = match read_request(&mut input) {
            Ok(Some(request)) => request,
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        };
        let output = Arc::clone(&output);
        running.push(std::thread::spawn(move || {
            let frame = run(&request).encode();
            let mut output = output.lock().unwrap_or_else(PoisonError::into_inner);
            // A host that stopped reading has gone away; there is no one left to tell.
            let _ = output.write_all(&frame).and_then(|()| output.flush());
        }));
        // Keep the list short in a long session: finished threads are joined as we go.
        running.retain(|thread| !thread.is_finished());
    };
    for thread in running {
        let _ = thread.join();
    }
    result
}

/// The next request, or `None` at the end of the input between frames.
fn read_request(input: &mut impl Read) -> Result<Option<Request>, ServeError> {
    let mut prefix = [0; 4];
    match input.read_exact(&mut prefix) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(ServeError::Read(error)),
    }
    let length = u32::from_be_bytes(prefix) as usize;
    if length > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge(length).into());
    }
    let mut body = Vec::new();
    input
        .take(length as u64)
        .read_to_end(&mut body)
        .map_err(ServeError::Read)?;
    if body.len() < length {
        return Err(FrameError::Truncated("body").into());
    }
    Ok(Some(Request::decode(&body)?))
}

/// Run one command under `timeout(1)` and collect what it printed, up to its cap.
pub fn run(request: &Request) -> Response {
    let mut response = Response {
        id: request.id,
        ..Response::default()
    };
    let mut command = Command::new("timeout");
    command
        .arg(KILL_AFTER)
        .arg(request.timeout_secs.max(1).to_string())
        .args(&request.argv)
        .stdin(if request.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            response.exit_code = NOT_STARTED_EXIT;
            response.stderr = format!(
                "airlock-runner: could not start timeout(1) for {:?}: {error}",
                request.argv[0]
            )
            .into_bytes();
            return response;
        }
    };
    // stdin is written on a thread of its own: a command that prints before reading all of its
    // input would otherwise block against us.
    let feeder = child.stdin.take().map(|mut pipe| {
        let bytes = request.stdin.clone().unwrap_or_default();
        std::thread::spawn(move || {
            // A command that exits without reading its input closes the pipe; that is its choice.
            let _ = pipe.write_all(&bytes);
        })
    });
    let budget = Arc::new(AtomicU64::new(request.max_output));
    let stdout = child.stdout.take().map(|pipe| collect(pipe, &budget));
    let stderr = child.stderr.take().map(|pipe| collect(pipe, &budget));
    let status = child.wait();
    for (reader, target) in [
        (stdout, &mut response.stdout),
        (stderr, &mut response.stderr),
    ] {
        if let Some(Ok((kept, dropped))) = reader.map(std::thread::JoinHandle::join) {
            *target = kept;
            response.dropped += dropped;
        }
    }
    if let Some(feeder) = feeder {
        let _ = feeder.join();
    }
    response.exit_code = match status {
        Ok(status) => exit_code(status),
        Err(error) => {
            response
                .stderr
                .extend_from_slice(format!("airlock-runner: waiting failed: {error}").as_bytes());
            NOT_STARTED_EXIT
        }
    };
    response
}

/// Read a pipe to its end on a thread, keeping what the shared budget allows.
fn collect(
    mut pipe: impl Read + Send + 'static,
    budget: &Arc<AtomicU64>,
) -> std::thread::JoinHandle<(Vec<u8>, u64)> {
    let budget = Arc::clone(budget);
    std::thread::spawn(move || {
        let (mut kept, mut dropped) = (Vec::new(), 0_u64);
        let mut chunk = vec![0; 64 * 1024];
        loop {
            let read = match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let wanted = read as u64;
            let granted = budget
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                    Some(left - left.min(wanted))
                })
                .map_or(0, |left| left.min(wanted));
            // `granted` is at most `read`, a usize.
            let granted_len = usize::try_from(granted).unwrap_or(read);
            kept.extend_from_slice(&chunk[..granted_len]);
            dropped += wanted - granted;
        }
        (kept, dropped)
    })
}

/// The exit code a shell would report: the code, or 128 + the signal that ended the process.
fn exit_code(status: std::process::ExitStatus) -> i64 {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => i64::from(code),
        (None, Some(signal)) => 128 + i64::from(signal),
        (None, None) => NOT_STARTED_EXIT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn request(argv: &[&str], stdin: Option<&[u8]>, max_output: u64) -> Request {
        Request {
            id: 1,
            timeout_secs: 10,
            max_output,
            argv: argv.iter().map(|&arg| arg.to_owned()).collect(),
            stdin: stdin.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn a_command_runs_without_a_shell_and_reports_its_output_and_exit() {
        let answer = run(&request(
            &["sh", "-c", "printf out; printf err >&2; exit 3"],
            None,
            1024,
        ));
        assert_eq!(
            (answer.exit_code, &answer.stdout[..], &answer.stderr[..]),
            (3, &b"out"[..], &b"err"[..])
        );
        // An argument is one argument, whatever it holds: no shell reads it.
        let literal = run(&request(&["printf", "%s", "$HOME; rm -rf /"], None, 1024));
        assert_eq!(literal.stdout, b"$HOME; rm -rf /");
    }

    #[test]
    fn stdin_is_given_then_closed_and_no_stdin_reads_as_empty() {
        let echoed = run(&request(&["cat"], Some(b"typed"), 1024));
        assert_eq!(echoed.stdout, b"typed");
        let nothing = run(&request(&["cat"], None, 1024));
        assert_eq!((nothing.exit_code, nothing.stdout.len()), (0, 0));
    }

    #[test]
    fn output_past_the_cap_is_counted_not_kept() {
        let answer = run(&request(&["head", "-c", "100000", "/dev/zero"], None, 1000));
        assert_eq!((answer.stdout.len(), answer.dropped), (1000, 99_000));
    }

    #[test]
    fn a_command_over_its_time_is_stopped_inside() {
        let mut slow = request(&["sleep", "30"], None, 1024);
        slow.timeout_secs = 1;
        assert_eq!(run(&slow).exit_code, TIMED_OUT_EXIT);
    }

    #[test]
    fn a_missing_program_is_reported_not_raised() {
        let answer = run(&request(&["/nonexistent/program"], None, 1024));
        assert_eq!(answer.exit_code, NOT_STARTED_EXIT);
        assert!(!answer.stderr.is_empty());
    }

    #[test]
    fn serve_answers_each_request_by_id_and_ends_with_its_input() {
        let mut input = request(&["printf", "one"], None, 1024).encode();
        let mut second = request(&["printf", "two"], None, 1024);
        second.id = 2;
        input.extend(second.encode());
        let output = Arc::new(Mutex::new(Vec::new()));
        serve(&input[..], SharedVec(Arc::clone(&output))).unwrap();
        let bytes = output.lock().unwrap().clone();
        let mut answers = std::collections::BTreeMap::new();
        let mut rest = &bytes[..];
        while let Some(body) = frame_body(rest).unwrap() {
            let answer = Response::decode(body).unwrap();
            answers.insert(answer.id, answer.stdout);
            rest = &rest[4 + body.len()..];
        }
        assert!(rest.is_empty());
        assert_eq!(answers[&1], b"one");
        assert_eq!(answers[&2], b"two");
    }

    #[test]
    fn serve_refuses_a_malformed_or_oversized_request() {
        let too_big = (u32::try_from(MAX_FRAME_BYTES).unwrap() + 1).to_be_bytes();
        assert!(matches!(
            serve(&too_big[..], std::io::sink()),
            Err(ServeError::Frame(FrameError::TooLarge(_)))
        ));
        let cut_short = [0, 0, 0, 10, 1, 2];
        assert!(matches!(
            serve(&cut_short[..], std::io::sink()),
            Err(ServeError::Frame(FrameError::Truncated(_)))
        ));
        let mut no_program = request(&["x"], None, 1).encode();
        // argc (after the 4-byte prefix, id, timeout and max_output) set to 0, the argument left as
        // trailing bytes: refused either way, never run.
        no_program[24..28].copy_from_slice(&0_u32.to_be_bytes());
        assert!(serve(&no_program[..], std::io::sink()).is_err());
    }

    /// A writer whose bytes the test can read after `serve` has consumed it.
    struct SharedVec(Arc<Mutex<Vec<u8>>>);

    impl Write for SharedVec {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    proptest! {
        #[test]
        fn requests_round_trip(
            id: u64,
            timeout_secs: u32,
            max_output: u64,
            argv in proptest::collection::vec(".*", 1..5),
            stdin in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
        ) {
            let request = Request { id, timeout_secs, max_output, argv, stdin };
            let frame = request.encode();
            let body = frame_body(&frame).unwrap().unwrap();
            prop_assert_eq!(Request::decode(body).unwrap(), request);
        }

        #[test]
        fn responses_round_trip(
            id: u64,
            exit_code: i64,
            dropped: u64,
            stdout in proptest::collection::vec(any::<u8>(), 0..64),
            stderr in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let response = Response { id, exit_code, dropped, stdout, stderr };
            let frame = response.encode();
            let body = frame_body(&frame).unwrap().unwrap();
            prop_assert_eq!(Response::decode(body).unwrap(), response);
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = frame_body(&bytes);
            let _ = Request::decode(&bytes);
            let _ = Response::decode(&bytes);
        }
    }
}
