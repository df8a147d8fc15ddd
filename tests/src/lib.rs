//! Helpers for the end-to-end tests: start the real `leaseholdd` and talk to it.
