//! A real SMTP server for tests: plain SMTP (RFC 5321: EHLO, MAIL, RCPT, DATA, RSET, NOOP,
//! QUIT) on 127.0.0.1:0 in the test process, recording each message it accepts. Enough for
//! a client to deliver to it as to a local relay; no TLS, no login.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One accepted message: envelope and the data as sent (dot-stuffing undone, headers
/// unfolded into one line each).
#[derive(Debug, Clone)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    pub data: String,
}

impl Mail {
    /// The first value of header `name` (case-insensitive), unfolded.
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next().unwrap_or("");
        let unfolded = head.replace("\r\n ", " ").replace("\r\n\t", " ");
        unfolded.split("\r\n").find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    }
}

pub struct SmtpServer {
    pub addr: std::net::SocketAddr,
    mails: Arc<Mutex<Vec<Mail>>>,
}

impl SmtpServer {
    pub fn start() -> SmtpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("port 0 binds");
        let addr = listener.local_addr().expect("bound address");
        let mails = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&mails);
        std::thread::Builder::new()
            .name("test-smtp".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    let kept = Arc::clone(&kept);
                    std::thread::spawn(move || {
                        let _ = session(stream, &kept);
                    });
                }
            })
            .expect("smtp thread starts");
        SmtpServer { addr, mails }
    }

    /// `smtp://127.0.0.1:PORT`, for `serve --smtp-url`.
    pub fn url(&self) -> String {
        format!("smtp://{}", self.addr)
    }

    pub fn mails(&self) -> Vec<Mail> {
        self.mails.lock().unwrap().clone()
    }

    /// Waits until `n` messages have arrived; all of them.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Mail> {
        super::wait_until(timeout, &format!("{n} mails"), || self.mails().len() >= n);
        self.mails()
    }
}

/// One client's conversation.
fn session(stream: TcpStream, mails: &Mutex<Vec<Mail>>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut say = |text: &str| writer.write_all(format!("{text}\r\n").as_bytes());
    say("220 test.invalid ESMTP")?;
    let (mut from, mut to) = (String::new(), Vec::new());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end();
        let verb = line
            .split([' ', ':'])
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        let argument = || {
            line.split_once(':')
                .map(|(_, a)| {
                    a.trim()
                        .trim_start_matches('<')
                        .split('>')
                        .next()
                        .unwrap_or("")
                        .to_string()
                })
                .unwrap_or_default()
        };
        match verb.as_str() {
            "EHLO" | "HELO" => say("250 test.invalid")?,
            "MAIL" => {
                from = argument();
                to.clear();
                say("250 OK")?
            }
            "RCPT" => {
                to.push(argument());
                say("250 OK")?
            }
            "DATA" => {
                say("354 end with <CRLF>.<CRLF>")?;
                let mut data = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line)? == 0 {
                        return Ok(());
                    }
                    if line == ".\r\n" || line == ".\n" {
                        break;
                    }
                    data.push_str(line.strip_prefix('.').unwrap_or(&line));
                }
                mails.lock().unwrap().push(Mail {
                    from: from.clone(),
                    to: to.clone(),
                    data,
                });
                say("250 OK queued")?
            }
            "RSET" => {
                from.clear();
                to.clear();
                say("250 OK")?
            }
            "NOOP" => say("250 OK")?,
            "QUIT" => {
                say("221 bye")?;
                return Ok(());
            }
            _ => say("502 command not implemented")?,
        }
    }
}
