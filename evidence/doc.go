package evidence
