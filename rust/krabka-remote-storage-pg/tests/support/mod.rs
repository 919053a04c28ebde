//! Real processes for the tests: a throwaway PostgreSQL (bin/rlmm-pgfixture,
//! as the Kafka plugin's tests use it) and rlmmd processes (bin/rlmmd).
//! `make rust-test` builds both and names them in RLMMD_BIN and
//! RLMM_PGFIXTURE_BIN; without those, the binaries in the repository's
//! bin/ are used, and a missing one fails the test.

#![allow(dead_code)]

use {
    krabka_remote_storage_pg::RlmmdRemoteLogMetadataManager,
    std::{
        io::{BufRead, BufReader, Write},
        path::PathBuf,
        process::{Child, ChildStdin, ChildStdout, Command, Stdio},
        sync::{
            Mutex, OnceLock,
            atomic::{AtomicU64, Ordering},
            mpsc,
        },
        time::{Duration, Instant},
    },
};

/// One timeout for every wait; RLMM_TEST_TIMEOUT_SCALE scales it on slow
/// machines.
pub fn timeout() -> Duration {
    let scale: u32 = std::env::var("RLMM_TEST_TIMEOUT_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    Duration::from_secs(90) * scale
}

/// Polls `cond` until it holds, failing the test after [`timeout`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout();
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {:?} waiting for {what}",
            timeout()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn bin(var: &str, name: &str) -> PathBuf {
    let p = std::env::var_os(var).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../bin")
                .join(name)
        },
        PathBuf::from,
    );
    assert!(
        p.is_file(),
        "{} is missing: run the tests through `make rust-test`, which builds it and sets {var}",
        p.display()
    );
    p
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// A name no other call in this process returns.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    )
}

/// The PostgreSQL of bin/rlmm-pgfixture: started on creation, stopped and
/// deleted when its stdin closes (at drop, or when the test process ends).
pub struct Postgres {
    child: Child,
    io: Mutex<Option<(ChildStdin, BufReader<ChildStdout>)>>,
}

impl Postgres {
    pub fn start() -> Self {
        let mut child = Command::new(bin("RLMM_PGFIXTURE_BIN", "rlmm-pgfixture"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start rlmm-pgfixture");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut ready = String::new();
        stdout.read_line(&mut ready).expect("read rlmm-pgfixture");
        assert!(
            ready.starts_with("READY"),
            "rlmm-pgfixture did not start: {ready:?}"
        );
        Self {
            child,
            io: Mutex::new(Some((stdin, stdout))),
        }
    }

    fn command(&self, cmd: &str) -> String {
        let mut io = self.io.lock().unwrap();
        let (stdin, stdout) = io.as_mut().expect("rlmm-pgfixture is closed");
        writeln!(stdin, "{cmd}").expect("write rlmm-pgfixture");
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read rlmm-pgfixture");
        assert!(
            !line.is_empty() && !line.starts_with("ERR"),
            "rlmm-pgfixture {cmd}: {line:?}"
        );
        line.trim_end().to_owned()
    }

    /// A new migrated database; its DSN.
    pub fn database(&self) -> String {
        let line = self.command(&format!("db {}", unique("rs")));
        line.strip_prefix("DSN ")
            .expect("rlmm-pgfixture answers DSN")
            .to_owned()
    }

    /// Fast shutdown of the server.
    pub fn stop(&self) {
        self.command("stop");
    }

    /// Starts the server again.
    pub fn start_again(&self) {
        self.command("start");
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // The end of its stdin stops the server and deletes the cluster.
        self.io.lock().unwrap_or_else(|p| p.into_inner()).take();
        let _ = self.child.wait();
    }
}

/// One PostgreSQL for a whole test binary; each test takes its own
/// databases from it.
pub fn shared_postgres() -> &'static Postgres {
    static PG: OnceLock<Postgres> = OnceLock::new();
    PG.get_or_init(Postgres::start)
}

/// One rlmmd process, killed at drop.
pub struct Rlmmd {
    pub target: String,
    dsn: String,
    child: Option<Child>,
}

impl Rlmmd {
    /// An rlmmd on a new unix socket, serving. Its INFO lines are not
    /// shown, its warnings and errors are.
    pub fn unix(dsn: &str) -> Self {
        let path = std::env::temp_dir().join(format!("{}.sock", unique("rlmmd")));
        Self::with_target(dsn, format!("unix:{}", path.display()))
    }

    /// An rlmmd on a free loopback port, serving.
    pub fn tcp(dsn: &str) -> Self {
        Self::with_target(dsn, format!("127.0.0.1:{}", free_port()))
    }

    /// An rlmmd on a free loopback port with `extra` flags (TLS), serving.
    pub fn tcp_with(dsn: &str, extra: &[&str]) -> Self {
        let mut d = Self {
            target: format!("127.0.0.1:{}", free_port()),
            dsn: dsn.to_owned(),
            child: None,
        };
        d.start(extra);
        d
    }

    fn with_target(dsn: &str, target: String) -> Self {
        let mut d = Self {
            target,
            dsn: dsn.to_owned(),
            child: None,
        };
        d.start(&[]);
        d
    }

    /// Starts it (again) with `extra` flags and waits until it serves.
    pub fn start(&mut self, extra: &[&str]) {
        assert!(self.child.is_none(), "rlmmd is running");
        let mut cmd = Command::new(bin("RLMMD_BIN", "rlmmd"));
        cmd.args([
            "--listen",
            &self.target,
            "--metrics-listen",
            "",
            "--database-url",
            &self.dsn,
            "--health-interval",
            "500ms",
            "--log-level",
            "info",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start rlmmd");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let name = self.target.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("rlmmd: serving") {
                    let _ = tx.send(());
                } else if !line.contains("level=INFO") {
                    eprintln!("[rlmmd {name}] {line}");
                }
            }
        });
        if rx.recv_timeout(timeout()).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rlmmd on {} did not start serving", self.target);
        }
        self.child = Some(child);
    }

    /// Sends `signal` (a name `kill` takes: STOP, CONT, TERM) to it.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("rlmmd is running").id();
        let st = Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -{signal} {pid}");
    }

    /// SIGKILL: no graceful stop.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Rlmmd {
    fn drop(&mut self) {
        // A stopped process dies of SIGKILL too, and leaves its socket.
        self.kill();
        if let Some(path) = self.target.strip_prefix("unix:") {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A port nothing listens on at the moment of the call.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A manager of `target` with deadlines that suit a busy machine.
pub fn manager(target: &str) -> RlmmdRemoteLogMetadataManager {
    RlmmdRemoteLogMetadataManager::builder(target)
        .call_timeout(Duration::from_secs(30))
        .build()
        .expect("build the manager")
}
