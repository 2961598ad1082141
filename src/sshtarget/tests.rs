use super::*;

fn targets() -> SshTargets {
    SshTargets {
        aliases: vec![
            Alias {
                name: "gpu-a".into(),
                hostname: "10.0.0.5".into(),
                port: 22,
            },
            Alias {
                name: "mac".into(),
                hostname: "studio.local".into(),
                port: 22,
            },
            Alias {
                name: "odd".into(),
                hostname: "10.0.0.8".into(),
                port: 2222,
            },
        ],
        local: ["10.0.0.1".parse().unwrap()].into_iter().collect(),
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn a_node_whose_address_an_alias_names_gets_the_users_alias() {
    let t = targets();
    assert_eq!(
        t.for_node(ip("10.0.0.5"), "whatever", Some((true, Some(22))))
            .as_deref(),
        Some("gpu-a")
    );
    assert_eq!(
        t.for_node(ip("::ffff:10.0.0.5"), "", None).as_deref(),
        Some("gpu-a"),
        "a mapped v4 is that v4"
    );
}

#[test]
fn an_alias_whose_host_name_is_the_boxs_own_name_is_used() {
    let t = targets();
    assert_eq!(
        t.for_node(ip("10.0.0.9"), "studio", None).as_deref(),
        Some("mac")
    );
    assert_eq!(
        t.for_node(ip("10.0.0.9"), "", None).as_deref(),
        Some("10.0.0.9"),
        "no name, no match"
    );
}

#[test]
fn without_an_alias_the_address_is_written_with_a_port_only_where_needed() {
    let t = targets();
    assert_eq!(
        t.for_node(ip("10.0.0.6"), "b", Some((true, Some(22))))
            .as_deref(),
        Some("10.0.0.6")
    );
    assert_eq!(
        t.for_node(ip("10.0.0.6"), "b", Some((true, Some(2200))))
            .as_deref(),
        Some("ssh://10.0.0.6:2200")
    );
    assert_eq!(
        t.for_node(ip("fd00::6"), "b", Some((true, Some(2200))))
            .as_deref(),
        Some("ssh://[fd00::6]:2200")
    );
    assert_eq!(
        t.for_node(ip("fd00::6"), "b", None).as_deref(),
        Some("fd00::6")
    );
    assert_eq!(
        t.for_node(ip("10.0.0.6"), "b", Some((false, None)))
            .as_deref(),
        Some("10.0.0.6"),
        "a box without sshd still gets its ssh (the report says it does not answer)"
    );
}

#[test]
fn an_alias_to_another_port_than_the_boxs_sshd_is_not_used() {
    let t = targets();
    assert_eq!(
        t.for_node(ip("10.0.0.8"), "", Some((true, Some(22))))
            .as_deref(),
        Some("10.0.0.8")
    );
    assert_eq!(
        t.for_node(ip("10.0.0.8"), "", Some((true, Some(2222))))
            .as_deref(),
        Some("odd")
    );
    assert_eq!(
        t.for_node(ip("10.0.0.8"), "", None).as_deref(),
        Some("odd"),
        "unknown port: trust the alias"
    );
}

#[test]
fn the_coordinators_own_box_gets_no_ssh() {
    let t = targets();
    assert_eq!(t.for_node(ip("10.0.0.1"), "", None), None);
    assert_eq!(t.for_node(ip("127.0.0.1"), "", None), None);
}

#[test]
fn host_names_skip_patterns_and_follow_includes() {
    let dir = tempfile::tempdir().unwrap();
    let inc = dir.path().join("conf.d");
    std::fs::create_dir(&inc).unwrap();
    std::fs::write(
        inc.join("lab.conf"),
        "Host lab-1 lab-2\n  HostName 10.1.0.1\n",
    )
    .unwrap();
    let main = dir.path().join("config");
    std::fs::write(
        &main,
        format!(
            "Host gpu-a gpu-b\n  HostName 10.0.0.5\nHost *.corp !bastion\nHost=eq\nInclude {}/*.conf\nHost gpu-a\n",
            inc.display()
        ),
    )
    .unwrap();
    assert_eq!(
        host_names(&main),
        ["gpu-a", "gpu-b", "eq", "lab-1", "lab-2"]
    );
    assert!(host_names(&dir.path().join("missing")).is_empty());
}

#[test]
fn ssh_g_output_gives_the_host_name_and_port() {
    let out = "user me\nhostname 10.0.0.5\nport 2222\nidentityfile ~/.ssh/id\n";
    assert_eq!(
        parse_g("gpu-a", out),
        Some(Alias {
            name: "gpu-a".into(),
            hostname: "10.0.0.5".into(),
            port: 2222
        })
    );
    assert_eq!(parse_g("x", "port 22\n"), None);
}

#[test]
fn sshs_failures_are_named_by_their_cause() {
    for (stderr, want) in [
        ("Host key verification failed.\n", "host key"),
        (
            "me@10.0.0.5: Permission denied (publickey).\n",
            "authentication refused",
        ),
        (
            "ssh: connect to host 10.0.0.5 port 22: Connection timed out\n",
            "timeout",
        ),
        (
            "ssh: connect to host 10.0.0.5 port 22: Connection refused\n",
            "no SSH server",
        ),
        (
            "ssh: Could not resolve hostname nope: Name or service not known\n",
            "the name does not resolve",
        ),
    ] {
        assert!(
            classify(stderr).starts_with(want),
            "{stderr} -> {}",
            classify(stderr)
        );
    }
}

#[test]
fn an_ssh_written_from_the_address_follows_a_move_and_an_alias_stays() {
    assert_eq!(
        follow("10.0.0.5", "10.0.0.5:9100", "10.0.0.7:9100").as_deref(),
        Some("10.0.0.7")
    );
    assert_eq!(
        follow("ssh://[fd00::5]:2200", "[fd00::5]:9100", "[fd00::7]:9100").as_deref(),
        Some("ssh://[fd00::7]:2200")
    );
    assert_eq!(follow("gpu-a", "10.0.0.5:9100", "10.0.0.7:9100"), None);
    assert!(follows_addr("10.0.0.5", "10.0.0.5:9100"));
    assert!(
        !follows_addr("gpu-a", "gpu-a:9100"),
        "an ssh_hosts alias is not an address"
    );
}
