//! HTTP basic auth against `basic_auth_users` (bcrypt hashes), with a short cache of successful
//! checks so a 15 s scrape costs one bcrypt a minute, not one per scrape. Decides yes/no only;
//! the 401 response is the middleware's.

use base64::Engine as _;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// How long a successful (user, hash, password) stays trusted without bcrypt.
pub const CACHE_TTL: Duration = Duration::from_secs(60);
/// At most this many cached successes (only right passwords get in, so this is a few users).
const CACHE_MAX: usize = 256;

pub struct Users {
    hashes: BTreeMap<String, String>,
    /// A hash of the highest configured cost: unknown users are checked against it, so a
    /// wrong user name takes as long as a wrong password.
    decoy: String,
    cache: Mutex<HashMap<[u8; 32], Instant>>,
    /// One bcrypt at a time: a flood of wrong passwords takes one core, never both.
    bcrypt_gate: Semaphore,
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the hashes.
        f.debug_struct("Users")
            .field("users", &self.hashes.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Users {
    /// `hashes` were checked by `WebConfigFile::validate`. Makes the decoy hash (one bcrypt).
    pub fn new(hashes: BTreeMap<String, String>) -> Users {
        let cost = hashes
            .values()
            .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
            .map(|p| p.get_cost())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        let decoy = bcrypt::hash("ssdwatch decoy password", cost).unwrap_or_default();
        Users {
            hashes,
            decoy,
            cache: Mutex::new(HashMap::new()),
            bcrypt_gate: Semaphore::new(1),
        }
    }

    /// Whether an `Authorization` header value names a user with the right password.
    pub async fn check(&self, authorization: Option<&[u8]>) -> bool {
        let Some((user, password)) = authorization.and_then(parse_basic) else {
            return false;
        };
        let (hash, known) = match self.hashes.get(&user) {
            Some(h) => (h.clone(), true),
            None => (self.decoy.clone(), false),
        };
        let key = digest(&user, &hash, &password);
        if known && self.cached(&key) {
            return true;
        }
        let Ok(_permit) = self.bcrypt_gate.acquire().await else {
            return false;
        };
        // A success that landed while we waited for the gate.
        if known && self.cached(&key) {
            return true;
        }
        let ok =
            tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash).unwrap_or(false))
                .await
                .unwrap_or(false)
                && known;
        if ok {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            cache.retain(|_, t| now.duration_since(*t) < CACHE_TTL);
            if cache.len() < CACHE_MAX {
                cache.insert(key, now);
            }
        }
        ok
    }

    fn cached(&self, key: &[u8; 32]) -> bool {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.get(key).is_some_and(|t| t.elapsed() < CACHE_TTL)
    }
}

/// SHA-256 of user, hash and password: the cache never holds a password, and a changed hash
/// (a reload) can't match an old entry.
fn digest(user: &str, hash: &str, password: &str) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [user, hash, password] {
        ctx.update(&(part.len() as u64).to_le_bytes());
        ctx.update(part.as_bytes());
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// `Basic base64(user:password)` → (user, password).
pub fn parse_basic(value: &[u8]) -> Option<(String, String)> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, password: &str) -> Vec<u8> {
        let enc = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {enc}").into_bytes()
    }

    #[test]
    fn basic_header_is_parsed_and_other_schemes_are_not() {
        assert_eq!(
            parse_basic(&header("alice", "a:b")),
            Some(("alice".into(), "a:b".into()))
        );
        assert_eq!(parse_basic(b"Bearer abc"), None);
        assert_eq!(parse_basic(b"Basic !!!"), None);
    }

    #[tokio::test]
    async fn right_password_passes_and_is_then_answered_from_the_cache() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let users = Users::new(BTreeMap::from([("alice".to_string(), hash)]));
        assert!(users.check(Some(&header("alice", "s3cret"))).await);
        assert!(!users.check(Some(&header("alice", "wrong"))).await);
        assert!(!users.check(Some(&header("mallory", "s3cret"))).await);
        assert!(!users.check(None).await);
        // Cached: no bcrypt needed even with the gate held.
        let _held = users.bcrypt_gate.acquire().await.unwrap();
        let right = header("alice", "s3cret");
        let check = users.check(Some(&right));
        let ok = tokio::time::timeout(Duration::from_secs(1), check).await;
        assert_eq!(ok, Ok(true));
    }
}
