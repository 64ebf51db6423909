//! SMART: the collector against a fake smartctl (hangs, garbage, escapes, limits), every real
//! capture through `ssdwatch smart inspect`, drives smartctl's database does not know, property
//! tests of the parser, and the real smartctl on this machine.

mod collector;
mod escape;
mod fuzz;
mod inspect;
mod limits;
mod race;
mod real;
mod recognition;
mod stuck_descendant;
