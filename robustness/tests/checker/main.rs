//! The checker on hand-written histories, legal and illegal, each with the
//! verdict it must give: at least one per kind of violation, and the
//! `unknown` answers both ways (one that may have taken effect explains
//! what follows; one that could not have does not).

mod build;
mod count;
mod events;
mod seats;
