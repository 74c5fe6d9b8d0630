//! Which session gives way when the store is full (SPEC §6), as pure functions: an agent's
//! store prunes a running one when it must (Codex's way); a person's never does, and refuses
//! a new one instead ([`WhenFull`]).

use crate::config::WhenFull;

/// What pruning needs to know of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionMeta {
    pub session_id: i32,
    /// Higher is more recent (a store-wide use counter).
    pub last_used: u64,
    pub exited: bool,
}

/// Whether a store that runs `running` sessions (and calls starting one) refuses another.
pub fn refuses_another(running: usize, limit: usize, when_full: WhenFull) -> bool {
    when_full == WhenFull::Refuse && running >= limit
}

/// The session to prune: never one of the `protected_recent` most recently used; among the
/// rest the least recently used exited one, else (under [`WhenFull::Prune`] only) the least
/// recently used.
pub fn session_to_prune(
    meta: &[SessionMeta],
    protected_recent: usize,
    when_full: WhenFull,
) -> Option<i32> {
    let mut by_recency: Vec<&SessionMeta> = meta.iter().collect();
    by_recency.sort_by_key(|m| std::cmp::Reverse(m.last_used));
    let candidates = by_recency.get(protected_recent..)?;
    let lru = |it: &mut dyn Iterator<Item = &&SessionMeta>| {
        it.min_by_key(|m| m.last_used).map(|m| m.session_id)
    };
    let exited = lru(&mut candidates.iter().filter(|m| m.exited));
    match when_full {
        WhenFull::Prune => exited.or_else(|| lru(&mut candidates.iter())),
        WhenFull::Refuse => exited,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use WhenFull::{Prune, Refuse};

    fn metas(n: usize, exited: &[i32]) -> Vec<SessionMeta> {
        (0..n as i32)
            .map(|i| SessionMeta {
                session_id: 1000 + i,
                last_used: i as u64,
                exited: exited.contains(&(1000 + i)),
            })
            .collect()
    }

    #[test]
    fn lru_when_nothing_exited() {
        assert_eq!(session_to_prune(&metas(64, &[]), 8, Prune), Some(1000));
    }

    #[test]
    fn a_persons_store_never_prunes_a_running_session() {
        assert_eq!(session_to_prune(&metas(64, &[]), 8, Refuse), None);
        assert_eq!(
            session_to_prune(&metas(64, &[1010, 1020]), 8, Refuse),
            Some(1010)
        );
    }

    #[test]
    fn a_persons_store_refuses_at_its_limit_and_an_agents_never() {
        assert!(!refuses_another(63, 64, Refuse));
        assert!(refuses_another(64, 64, Refuse));
        assert!(!refuses_another(640, 64, Prune));
    }

    #[test]
    fn exited_outside_the_recent_eight_goes_first() {
        assert_eq!(
            session_to_prune(&metas(64, &[1010, 1020]), 8, Prune),
            Some(1010)
        );
    }

    #[test]
    fn the_recent_eight_are_protected_even_when_exited() {
        // 1063..=1056 are the 8 most recent; 1060 exited but is protected.
        assert_eq!(session_to_prune(&metas(64, &[1060]), 8, Prune), Some(1000));
    }

    #[test]
    fn nothing_to_prune_among_protected_only() {
        assert_eq!(session_to_prune(&metas(8, &[1003]), 8, Prune), None);
        assert_eq!(session_to_prune(&[], 8, Prune), None);
    }
}
