//! Who may speak for the client: the reverse proxies whose forwarding
//! headers (`X-Forwarded-For`, `-Proto`) are believed (`--trusted-proxies`,
//! CIDR blocks, loopback by default), and the origin browsers use
//! (`--public-url`), which decides the same-origin check and the cookie's
//! `Secure` flag instead of the request's `Host`.

use std::net::IpAddr;

/// An address block: `10.0.0.0/8`, `::1/128`, or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        // A v4 peer may arrive as ::ffff:a.b.c.d on a dual-stack socket.
        match (self.net, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                masked(u32::from(net).into(), self.prefix, 32)
                    == masked(u32::from(ip).into(), self.prefix, 32)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                masked(u128::from(net), self.prefix, 128)
                    == masked(u128::from(ip), self.prefix, 128)
            }
            _ => false,
        }
    }
}

/// The top `prefix` bits of a `width`-bit address.
fn masked(addr: u128, prefix: u8, width: u8) -> u128 {
    if prefix == 0 {
        return 0;
    }
    addr >> (width - prefix)
}

impl std::str::FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Cidr, String> {
        let s = s.trim();
        let (ip, prefix) = match s.split_once('/') {
            Some((ip, p)) => (ip, Some(p)),
            None => (s, None),
        };
        let net: IpAddr = ip
            .parse()
            .map_err(|_| format!("{s:?} is not an address or CIDR block (e.g. 10.0.0.0/8)"))?;
        let width = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => width,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= width)
                .ok_or_else(|| format!("{s:?}: the prefix length must be 0 to {width}"))?,
        };
        Ok(Cidr { net, prefix })
    }
}

/// The origin browsers reach the server at (`--public-url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicOrigin {
    /// `scheme://host[:port]`, lowercase, no path.
    pub origin: String,
    pub https: bool,
}

impl std::str::FromStr for PublicOrigin {
    type Err = String;

    fn from_str(s: &str) -> Result<PublicOrigin, String> {
        let lower = s.trim().to_ascii_lowercase();
        let (https, rest) = if let Some(rest) = lower.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = lower.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!("{s:?} must start with https:// (or http://)"));
        };
        let host = rest.strip_suffix('/').unwrap_or(rest);
        let bad = |c: char| matches!(c, '/' | '?' | '#' | '@') || c.is_whitespace();
        if host.is_empty() || host.contains(bad) {
            return Err(format!(
                "{s:?} must be an origin: scheme and host (and port), no path, query or user"
            ));
        }
        let scheme = if https { "https" } else { "http" };
        Ok(PublicOrigin {
            origin: format!("{scheme}://{host}"),
            https,
        })
    }
}

/// What the forwarding and origin checks go by.
#[derive(Debug, Clone)]
pub struct ProxyPolicy {
    pub trusted: Vec<Cidr>,
    pub public: Option<PublicOrigin>,
}

impl Default for ProxyPolicy {
    /// Loopback proxies only (a TLS proxy on the same host), no public URL.
    fn default() -> Self {
        ProxyPolicy {
            trusted: DEFAULT_TRUSTED
                .split(',')
                .filter_map(|c| c.parse().ok())
                .collect(),
            public: None,
        }
    }
}

/// `--trusted-proxies`' default: loopback.
pub const DEFAULT_TRUSTED: &str = "127.0.0.0/8,::1/128";

impl ProxyPolicy {
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|c| c.contains(ip))
    }

    /// The client behind a trusted `peer`: walking `X-Forwarded-For` from
    /// the right (each proxy appends), the first address no trusted proxy
    /// has; the leftmost if all are trusted. Entries that are not
    /// addresses end the walk (nothing before them can be believed).
    pub fn client_behind(&self, peer: IpAddr, forwarded_for: Option<&str>) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        for hop in forwarded_for.unwrap_or("").rsplit(',') {
            let Ok(ip) = hop.trim().parse::<IpAddr>() else {
                break;
            };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_blocks() {
        let c: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(c.contains(ip("10.1.255.3")));
        assert!(!c.contains(ip("10.2.0.1")));
        assert!(c.contains(ip("::ffff:10.1.0.9")), "v4-mapped");
        let one: Cidr = "192.0.2.7".parse().unwrap();
        assert!(one.contains(ip("192.0.2.7")) && !one.contains(ip("192.0.2.8")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.1")) && !all.contains(ip("::1")));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        for bad in ["", "10.0.0.0/33", "::/129", "nope/8", "10.0.0.0/x"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_client_is_the_first_untrusted_hop_from_the_right() {
        let p = ProxyPolicy {
            trusted: vec!["10.0.0.0/8".parse().unwrap()],
            public: None,
        };
        let proxy = ip("10.0.0.2");
        assert_eq!(
            p.client_behind(proxy, Some("203.0.113.9")),
            ip("203.0.113.9")
        );
        // A client's own X-Forwarded-For entry comes before the real one.
        assert_eq!(
            p.client_behind(proxy, Some("1.2.3.4, 203.0.113.9, 10.0.0.5")),
            ip("203.0.113.9")
        );
        assert_eq!(
            p.client_behind(proxy, Some("junk, 10.0.0.5")),
            ip("10.0.0.5")
        );
        assert_eq!(p.client_behind(proxy, None), proxy);
        // An untrusted peer's header is ignored.
        assert_eq!(
            p.client_behind(ip("198.51.100.1"), Some("1.2.3.4")),
            ip("198.51.100.1")
        );
        assert!(ProxyPolicy::default().trusts(ip("127.0.0.2")));
        assert!(ProxyPolicy::default().trusts(ip("::1")));
    }

    #[test]
    fn public_urls_are_origins() {
        let o: PublicOrigin = "HTTPS://Leasehold.Example.com/".parse().unwrap();
        assert_eq!(o.origin, "https://leasehold.example.com");
        assert!(o.https);
        let o: PublicOrigin = "http://10.0.0.1:7400".parse().unwrap();
        assert!(!o.https);
        for bad in [
            "leasehold.example.com",
            "ftp://x",
            "https://",
            "https://x/ui",
            "https://a@b",
        ] {
            assert!(bad.parse::<PublicOrigin>().is_err(), "{bad}");
        }
    }
}
