package httpapi

// StopListening closes the API's first-step listener for good, as a
// connection that stays down would: first answers are then read from the
// orders' rows. Compiled into the tests alone.
func (s *Server) StopListening() { s.steps.Close() }
