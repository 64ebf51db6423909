//! Who a client is, for the shares of the rate limit and of the password checks: an address
//! that many connections can't multiply. Used by `limits` and `auth` alike.

use std::net::{IpAddr, Ipv6Addr};

/// Whose share a request counts against: its IPv4 address, or its IPv6 /64 (a host's usual
/// allocation: a client with a /64 has 2^64 addresses, not 2^64 shares). An IPv4-mapped IPv6
/// address is its IPv4 address.
pub(crate) fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}
