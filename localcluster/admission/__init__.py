"""Admission: the webhook chain (`chain`), which hooks match a request (`match`), and the
validation of webhook configurations (`config`)."""
