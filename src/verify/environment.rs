//! The NCCL/Gloo environment the spec chose (which netdev, which GID index, which HCA) is what the
//! processes inside see.

use super::proc_self::{ProcSelf, Unread};
use super::Expected;
use crate::check::{Check, Status};

const NAME: &str = "environment";

pub fn check(proc_self: &Result<ProcSelf, Unread>, expected: &Expected) -> Check {
    if expected.nccl_env.is_empty() {
        return Check::new(NAME, Status::Info, "the spec sets no NCCL/Gloo variables on this node", None);
    }
    let environment = match proc_self {
        Ok(read) => &read.environment,
        Err(unread) => return Check::new(NAME, unread.status, unread.message.clone(), None),
    };
    let wrong: Vec<String> = expected
        .nccl_env
        .iter()
        .filter(|(key, value)| environment.get(key) != Some(value))
        .map(|(key, value)| match environment.get(key) {
            Some(found) => format!("{key}={value} (inside: {found:?})"),
            None => format!("{key}={value} (inside: unset)"),
        })
        .collect();
    if wrong.is_empty() {
        let set: Vec<&str> = expected.nccl_env.iter().map(|(k, _)| k.as_str()).collect();
        Check::new(NAME, Status::Pass, format!("{} set inside", set.join(", ")), None)
    } else {
        Check::new(
            NAME,
            Status::Fail,
            format!("not set inside as the spec asks: {}", wrong.join(" ")),
            Some("recreate the toolbox (`strix-toolbox refresh --force`)".into()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::proc_self::parse;
    use super::super::proc_self::tests::{output, LIMITS_8MIB};
    use super::*;

    fn judged(environment: &[&str]) -> Check {
        let expected = Expected {
            nccl_env: vec![
                ("NCCL_IB_GID_INDEX".into(), "3".into()),
                ("NCCL_SOCKET_IFNAME".into(), "enp194s0f0".into()),
            ],
            ..Expected::default()
        };
        check(&Ok(parse(&output(environment, LIMITS_8MIB, "0"))), &expected)
    }

    #[test]
    fn every_variable_with_its_value() {
        let pass = judged(&["PATH=/bin", "NCCL_SOCKET_IFNAME=enp194s0f0", "NCCL_IB_GID_INDEX=3"]);
        assert_eq!(pass.status, Status::Pass, "{pass:?}");
        let fail = judged(&["NCCL_SOCKET_IFNAME=enp194s0f1"]);
        assert_eq!(fail.status, Status::Fail);
        assert!(fail.message.contains("NCCL_IB_GID_INDEX=3 (inside: unset)"), "{}", fail.message);
        assert!(fail.message.contains("NCCL_SOCKET_IFNAME=enp194s0f0 (inside: \"enp194s0f1\")"), "{}", fail.message);
    }

    #[test]
    fn nothing_to_check_is_information() {
        let check = check(&Ok(parse("")), &Expected::default());
        assert_eq!(check.status, Status::Info);
    }
}
