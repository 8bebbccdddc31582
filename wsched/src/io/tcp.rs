//! TCP (to do)
