package fakewecom

// AddUser adds u to corp's directory (a new hire), or replaces the member
// with u's UserID (moved to other departments), as WeCom's user/create
// and user/update would; the next directory read lists it. It reports
// whether the corp exists.
func (s *Server) AddUser(corpID string, u User) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.corps[corpID]
	if !ok {
		return false
	}
	for i := range c.Users {
		if c.Users[i].UserID == u.UserID {
			c.Users[i] = u
			return true
		}
	}
	c.Users = append(c.Users, u)
	c.userIx = nil
	return true
}
