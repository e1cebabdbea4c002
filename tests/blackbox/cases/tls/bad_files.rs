//! Bad TLS files (missing, garbage, half-written, mismatched, swapped, a flag without its
//! pair) stop the server with exit 2 before it listens, naming the file.

use std::time::{Duration, Instant};

use super::PairFiles;
use crate::support::tls::*;
use crate::support::*;

pub fn tls_bad_files_exit_2(bin: &'static str) {
    let ca = Ca::new("blackbox CA");
    let pair = ca.server("server", KeyForm::EcPkcs8);
    let other = ca.server("other", KeyForm::EcPkcs8);
    let files = PairFiles::new("bad-files", &pair);
    let (cert, key) = (files.cert.clone(), files.key.clone());
    let file = |name: &str, contents: &str| {
        let path = files.dir.file(name);
        write(&path, contents);
        path
    };
    let garbage_cert = file("garbage.crt", "this is not a certificate\n");
    let garbage_key = file("garbage.key", "this is not a key\n");
    let half_cert = file("half.crt", &pair.cert_pem[..pair.cert_pem.len() / 2]);
    let half_key = file("half.key", &pair.key_pem[..pair.key_pem.len() / 2]);
    let other_key = file("other.key", &other.key_pem);
    let empty = file("empty.pem", "");
    let garbage_ca = file(
        "garbage-ca.crt",
        "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
    );
    let missing = files.dir.file("missing.pem");

    // (what, flags, words of which stderr must hold one)
    let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        (
            "missing cert file",
            vec!["--tls-cert-file", &missing, "--tls-private-key-file", &key],
            vec![&missing],
        ),
        (
            "missing key file",
            vec!["--tls-cert-file", &cert, "--tls-private-key-file", &missing],
            vec![&missing],
        ),
        (
            "cert file of garbage",
            vec![
                "--tls-cert-file",
                &garbage_cert,
                "--tls-private-key-file",
                &key,
            ],
            vec![&garbage_cert],
        ),
        (
            "key file of garbage",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &garbage_key,
            ],
            vec![&garbage_key],
        ),
        (
            "empty cert file",
            vec!["--tls-cert-file", &empty, "--tls-private-key-file", &key],
            vec![&empty],
        ),
        (
            "half-written cert PEM",
            vec![
                "--tls-cert-file",
                &half_cert,
                "--tls-private-key-file",
                &key,
            ],
            vec![&half_cert],
        ),
        (
            "half-written key PEM",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &half_key,
            ],
            vec![&half_key],
        ),
        (
            "key of another certificate",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &other_key,
            ],
            vec![&other_key],
        ),
        (
            "cert and key swapped",
            vec!["--tls-cert-file", &key, "--tls-private-key-file", &cert],
            vec![&key, &cert],
        ),
        (
            "missing client CA",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &key,
                "--client-ca-file",
                &missing,
            ],
            vec![&missing],
        ),
        (
            "client CA of garbage",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &key,
                "--client-ca-file",
                &garbage_ca,
            ],
            vec![&garbage_ca],
        ),
        (
            "client CA file holding a key",
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-private-key-file",
                &key,
                "--client-ca-file",
                &key,
            ],
            vec![&key],
        ),
        (
            "--tls-cert-file without --tls-private-key-file",
            vec!["--tls-cert-file", &cert],
            vec!["tls-private-key-file", "tls_private_key_file"],
        ),
        (
            "--tls-private-key-file without --tls-cert-file",
            vec!["--tls-private-key-file", &key],
            vec!["tls-cert-file", "tls_cert_file"],
        ),
        (
            "--client-ca-file without the pair",
            vec!["--client-ca-file", &cert],
            vec!["tls-cert-file", "tls_cert_file"],
        ),
    ];
    let mut slowest = Duration::ZERO;
    for (what, flags, names) in cases {
        let mut args = vec!["--listen", "127.0.0.1:0"];
        args.extend_from_slice(&flags);
        let mut server = ServerProcess::spawn(bin, &args, &[]);
        let started = Instant::now();
        let code = server.expect_exit(Duration::from_secs(10));
        let took = started.elapsed();
        slowest = slowest.max(took);
        let context = format!("{bin}, {what} ({args:?})");
        assert_eq!(code, 2, "{context}: exit code\n{}", server.describe());
        let stderr = server.stderr_text();
        assert!(
            names.iter().any(|n| stderr.contains(n)),
            "{context}: stderr should name {names:?}\n{}",
            server.describe()
        );
        assert!(
            !server.stdout_text().contains("listening on"),
            "{context}: it listened\n{}",
            server.describe()
        );
        assert!(
            !stderr.contains("panicked"),
            "{context}: it panicked\n{}",
            server.describe()
        );
        assert!(
            took < Duration::from_secs(3),
            "{context}: took {took:?} to exit"
        );
    }
    eprintln!("{bin}: bad TLS files: slowest exit {slowest:?}");
}
