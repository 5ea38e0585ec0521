//! The watch's clock: CLOCK_BOOTTIME in milliseconds, which counts on through a suspend and
//! outlives the watch's process, so a watch started again (systemd's `Restart=on-failure`) keeps
//! its restart budget (clock_gettime(2)).

use crate::watch::Moment;

pub fn now() -> Moment {
    let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given; CLOCK_BOOTTIME exists on Linux 2.6.39+.
    let done = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut time) };
    if done != 0 {
        return Moment(0);
    }
    let seconds = u64::try_from(time.tv_sec).unwrap_or(0);
    let millis = u64::try_from(time.tv_nsec / 1_000_000).unwrap_or(0);
    Moment(seconds.saturating_mul(1000).saturating_add(millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_moves_forward() {
        let first = now();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(now() > first && first > Moment(0));
    }
}
